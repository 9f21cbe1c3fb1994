"""The what-if job: takes a run id, calls the service; a run already taken or finished is left alone."""

from __future__ import annotations

from celery import shared_task

from whatif import services


@shared_task(name="whatif.run", acks_late=True, ignore_result=True)
def run_whatif(run_id: int) -> None:
    services.whatif_run_execute(run_id=run_id)
