"""The Kubernetes side under API-server faults injected into the sandbox (sandbox/apiserver/faults.py),
end to end over real HTTP: 5xx and 429 are retried with back-off (Retry-After honoured), a persistent
error gives up after the policy's attempts with a readable error, every call has a deadline, a frozen API
server turns the cluster unreachable within a bounded time with a health check recorded, a deploy rides
through throttled writes, and a watch gets 410 Gone."""

from __future__ import annotations

import time

import pytest

import kube
from deployments.models import State
from deployments.tests.sandbox_helpers import deploy_now
from tests.faults.sandbox_fixtures import *  # noqa: F403

pytestmark = pytest.mark.usefixtures("fast_deploys")


@pytest.fixture(autouse=True)
def no_faults_left(lab_sandbox):
    lab_sandbox.clear_api_faults()
    yield
    lab_sandbox.clear_api_faults()


@pytest.fixture
def short_deadlines(settings):
    settings.KUBE_CONNECT_TIMEOUT_SECONDS = 1.0
    settings.KUBE_READ_TIMEOUT_SECONDS = 1.0
    settings.KUBE_PROBE_READ_TIMEOUT_SECONDS = 1.0
    settings.KUBE_CALL_DEADLINE_SECONDS = 8.0


def test_server_errors_are_retried_until_the_call_succeeds(lab_sandbox, conn):
    kube.list_objects(conn, "v1", "Namespace", None)  # discovery is cached; only the list meets the fault
    lab_sandbox.api_fault("http_5xx", status=503, count=2, path="/api/v1/namespaces")
    names = {n["metadata"]["name"] for n in kube.list_objects(conn, "v1", "Namespace", None)}
    assert "default" in names
    assert lab_sandbox.api_faults() == [], "both injected 503s were consumed by retries"


def test_a_persistent_server_error_gives_up_after_the_policy_with_a_readable_error(lab_sandbox, conn):
    kube.list_objects(conn, "v1", "Namespace", None)
    fault = lab_sandbox.api_fault("http_5xx", status=500, path="/api/v1/namespaces")
    with pytest.raises(kube.KubeError) as caught:
        kube.list_objects(conn, "v1", "Namespace", None)
    assert "500" in str(caught.value) or "server" in str(caught.value).lower()
    (left,) = lab_sandbox.api_faults()
    assert left["id"] == fault["id"] and left["hits"] == kube.retry.DEFAULT_POLICY.max_attempts


def test_throttling_waits_what_retry_after_says(lab_sandbox, conn):
    kube.list_objects(conn, "v1", "Namespace", None)
    lab_sandbox.api_fault("throttle", retry_after=1.5, count=1, path="/api/v1/namespaces")
    started = time.monotonic()
    kube.list_objects(conn, "v1", "Namespace", None)
    assert time.monotonic() - started >= 1.4


def test_a_slow_answer_within_the_read_timeout_is_fine_and_beyond_it_fails_in_bounded_time(
    lab_sandbox, conn, short_deadlines
):
    kube.list_objects(conn, "v1", "Namespace", None)
    lab_sandbox.api_fault("latency", delay_ms=300, count=1, path="/api/v1/namespaces")
    kube.list_objects(conn, "v1", "Namespace", None)
    lab_sandbox.api_fault("latency", delay_ms=5000, path="/api/v1/namespaces")
    started = time.monotonic()
    with pytest.raises(kube.KubeUnreachable, match="timeout"):
        kube.list_objects(conn, "v1", "Namespace", None)
    assert time.monotonic() - started < 8.0 + 1.5  # the call's deadline, retries included


def test_a_frozen_api_server_turns_the_cluster_unreachable_with_a_check_recorded(
    lab_sandbox, lab, short_deadlines
):
    from clusters.models import ClusterHealthCheck, HealthState
    from clusters.services import cluster_check

    assert cluster_check(cluster_id=lab.pk).health_state == HealthState.HEALTHY
    lab_sandbox.api_fault("freeze")
    started = time.monotonic()
    checked = cluster_check(cluster_id=lab.pk)
    took = time.monotonic() - started
    assert checked.health_state == HealthState.UNREACHABLE, checked.last_error
    assert "no answer before the timeout" in checked.last_error
    assert took < 5, f"the check took {took:.1f} s against a frozen server"
    latest = ClusterHealthCheck.objects.filter(cluster=lab).first()
    assert latest is not None and latest.state == HealthState.UNREACHABLE
    lab_sandbox.clear_api_faults()
    assert cluster_check(cluster_id=lab.pk).health_state == HealthState.HEALTHY


def test_the_cluster_check_has_a_queue_of_its_own():
    from django.conf import settings

    from controlplane.celery import app

    for task in ("clusters.tasks.check_cluster", "clusters.tasks.check_all_clusters"):
        assert app.amqp.router.route({}, task)["queue"].name == "cluster-check"
    assert app.amqp.router.route({}, "telemetry.tasks.collect_all")["queue"].name == "telemetry"
    assert "cluster-check" in settings.TANDEM_QUEUES


def test_a_deploy_rides_through_throttled_and_failing_writes(lab_sandbox, new_topology, operator):
    topology = new_topology("qwen-gpu-nixl")
    lab_sandbox.api_fault("throttle", retry_after=0.2, count=2, method="PATCH")
    lab_sandbox.api_fault("http_5xx", status=503, count=1, method="PATCH")
    deployment = deploy_now(topology, operator)
    assert deployment.state == State.SUCCEEDED, (deployment.error, deployment.diagnosis)
    assert lab_sandbox.api_faults() == []


def test_a_watch_with_a_stale_version_gets_410_gone(lab_sandbox):
    from kubernetes import client, watch
    from kubernetes.client.exceptions import ApiException

    lab_sandbox.api_fault("watch_gone", count=1)
    core = client.CoreV1Api(lab_sandbox.api_client())
    with pytest.raises(ApiException) as caught:
        for _ in watch.Watch().stream(core.list_namespaced_pod, "default", timeout_seconds=5):
            pass
    assert caught.value.status == 410
