"""Thin Celery tasks: run a deployment by id, check drift, reap orphaned jobs."""

from __future__ import annotations

import os
import socket

from celery import shared_task
from celery.app.task import Task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from deployments import runner


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@shared_task(
    bind=True,
    name="deployments.tasks.run_deployment",
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=None,
    # The database unavailable (restart, failover): retry with back-off up to 30 s apart, then resume.
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=1,
    retry_backoff_max=30,
    retry_jitter=False,
    # The job bounds itself (ready timeout per attempt, short timeouts on every cluster call), so the
    # global task time limit, sized for short tasks, must not cut a deploy and its rollback short.
    soft_time_limit=4 * 3600,
    time_limit=4 * 3600 + 60,
)
def run_deployment(self: Task, deployment_id: int) -> str:
    """Run or resume one deployment; idempotent (the database claim decides who runs it)."""
    outcome = runner.run(deployment_id, worker=worker_name())
    if outcome == "busy":
        # A live worker holds it; look again once its heartbeat would have gone stale.
        raise self.retry(countdown=float(getattr(settings, "DEPLOY_HEARTBEAT_STALE_SECONDS", 60)))
    return outcome


@shared_task(name="deployments.tasks.check_drift", ignore_result=True)
def check_drift() -> int:
    """Compare every deployed topology with its cluster objects; returns how many drifted."""
    from deployments.services import drift_check_all

    return drift_check_all()


@shared_task(name="deployments.tasks.reap_deployments", ignore_result=True)
def reap_deployments() -> int:
    """Resume (or fail) deployments whose worker stopped sending heartbeats; returns how many."""
    from deployments.selectors import orphaned_deployments
    from deployments.services import deployment_orphan_fail

    count = 0
    limit = int(getattr(settings, "DEPLOY_MAX_ATTEMPTS", 5))
    for deployment in orphaned_deployments():
        if deployment.attempts >= limit:
            deployment_orphan_fail(deployment=deployment, attempts=deployment.attempts)
        else:
            run_deployment.delay_on_commit(deployment.pk)
        count += 1
    return count
