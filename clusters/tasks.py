"""Thin Celery tasks: each loads ids and calls one service."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings

from clusters.models import Cluster
from clusters.selectors import check_due_clusters
from clusters.services import cluster_check


@shared_task(name="clusters.tasks.check_cluster", acks_late=True, ignore_result=True)
def check_cluster(cluster_id: int) -> None:
    """Full check of one cluster (idempotent: a second run just records another check)."""
    if Cluster.objects.filter(pk=cluster_id).exists():
        cluster_check(cluster_id=cluster_id)


@shared_task(name="clusters.tasks.check_all_clusters", ignore_result=True)
def check_all_clusters() -> None:
    """Beat entry (every CLUSTER_CHECK_SECONDS): queue a check for every cluster not checked lately."""
    interval = float(getattr(settings, "CLUSTER_CHECK_SECONDS", 60))
    for cluster_id in check_due_clusters(older_than=timedelta(seconds=interval * 0.8)):
        check_cluster.delay(cluster_id)
