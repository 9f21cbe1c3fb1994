"""The full check is queued on registration, due clusters are picked, in-cluster credentials work."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from clusters import tasks
from clusters.models import AuthMethod, Cluster, HealthState
from clusters.selectors import check_due_clusters
from clusters.services import cluster_register

pytestmark = pytest.mark.django_db


def test_registration_queues_a_full_check_on_commit(
    sandbox_cluster, admin_user, django_capture_on_commit_callbacks, monkeypatch
):
    queued: list[int] = []
    monkeypatch.setattr(tasks.check_cluster, "delay", lambda cluster_id: queued.append(cluster_id))
    with django_capture_on_commit_callbacks(execute=True):
        cluster = cluster_register(
            name="queued", kubeconfig=sandbox_cluster.kubeconfig_path.read_text(), actor=admin_user
        )
    assert queued == [cluster.pk]


def test_check_task_runs_the_check(sandbox_cluster, admin_user):
    cluster = cluster_register(
        name="task", kubeconfig=sandbox_cluster.kubeconfig_path.read_text(), actor=admin_user
    )
    tasks.check_cluster.apply(args=[cluster.pk])
    cluster.refresh_from_db()
    assert cluster.health_state == HealthState.HEALTHY
    assert cluster.nodes.count() == 4
    tasks.check_cluster.apply(args=[999999])  # a removed cluster is simply skipped


def test_only_clusters_not_checked_lately_are_due():
    now = timezone.now()
    fresh = Cluster.objects.create(
        name="fresh", auth_method=AuthMethod.TOKEN, server="http://127.0.0.1:1", last_checked=now
    )
    stale = Cluster.objects.create(
        name="stale",
        auth_method=AuthMethod.TOKEN,
        server="http://127.0.0.1:1",
        last_checked=now - timedelta(minutes=5),
    )
    never = Cluster.objects.create(name="never", auth_method=AuthMethod.TOKEN, server="http://127.0.0.1:1")
    due = set(check_due_clusters(older_than=timedelta(seconds=50)))
    assert due == {stale.pk, never.pk}
    assert fresh.pk not in due


def test_in_cluster_registration_uses_the_pod_service_account(
    sandbox_cluster_tls, admin_user, tmp_path, monkeypatch
):
    from urllib.parse import urlparse

    import kube.kubeconfig

    (tmp_path / "token").write_text(sandbox_cluster_tls.token)
    (tmp_path / "ca.crt").write_text(sandbox_cluster_tls.ca_path.read_text())
    (tmp_path / "namespace").write_text("tandem")
    url = urlparse(sandbox_cluster_tls.server)
    monkeypatch.setattr(kube.kubeconfig, "SERVICEACCOUNT_DIR", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", url.hostname)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(url.port))
    cluster = cluster_register(name="self", in_cluster=True, actor=admin_user)
    assert cluster.auth_method == AuthMethod.IN_CLUSTER
    assert cluster.token == ""  # nothing stored: the token file is read afresh on every connection
    from clusters.services import cluster_check

    assert cluster_check(cluster_id=cluster.pk).health_state == HealthState.HEALTHY
