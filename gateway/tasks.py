from __future__ import annotations

from celery import shared_task

from gateway import services


@shared_task(ignore_result=True, acks_late=True, soft_time_limit=600)
def run_probes(run_id: int) -> None:
    services.probe_run_execute(run_id=run_id)


@shared_task(ignore_result=True)
def discover_endpoints() -> None:
    services.routes_discover()
