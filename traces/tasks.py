from __future__ import annotations

from celery import shared_task

from traces import services


@shared_task(ignore_result=True)
def prune_traces() -> None:
    """Retention: traces older than TRACES_RETENTION_HOURS go (idempotent)."""
    services.traces_prune()
    services.traces_link_records()
