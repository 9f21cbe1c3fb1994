"""Thin Celery tasks: evaluate every topology's SLOs on the telemetry cadence, deliver notifications."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from slo import delivery, evaluation
from slo.models import Slo


@shared_task(name="slo.tasks.evaluate_all", ignore_result=True, acks_late=False)
def evaluate_all() -> int:
    """Enqueue one evaluation per topology with an enabled SLO (each expires after one interval, so a
    slow worker builds no backlog), and re-enqueue deliveries no worker took. Returns the evaluations."""
    interval = float(settings.TELEMETRY_INTERVAL_SECONDS)
    ids = sorted(set(Slo.objects.filter(enabled=True).values_list("topology_id", flat=True)))
    for topology_id in ids:
        evaluate_topology.apply_async(args=[topology_id], expires=interval, queue="telemetry")
    for delivery_id in delivery.overdue_deliveries():
        deliver.delay(delivery_id)
    return len(ids)


@shared_task(name="slo.tasks.evaluate_topology", ignore_result=True, acks_late=False)
def evaluate_topology(topology_id: int) -> list[str]:
    """Idempotent: an evaluation reads the counted events and changes an alert only on a transition."""
    return evaluation.slo_evaluate(topology_id=topology_id)


@shared_task(name="slo.tasks.deliver", ignore_result=True)
def deliver(delivery_id: int) -> float | None:
    """One attempt; on failure it enqueues itself again after the back-off (the attempt count bounds it).
    Idempotent: a delivery not due, delivered or claimed by another worker is left alone."""
    delay = delivery.delivery_attempt(delivery_id=delivery_id)
    if delay is not None:
        deliver.apply_async(args=[delivery_id], countdown=delay)
    return delay
