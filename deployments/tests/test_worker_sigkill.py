"""A deploy worker SIGKILLed mid-deploy: the redelivered task resumes the same job, which converges on one
succeeded deployment and the same cluster objects (no duplicates, no half-applied state)."""

from __future__ import annotations

import time

import pytest
import redis
from django.conf import settings

from deployments.drift import manifest_differences, object_key
from deployments.models import Deployment, State
from deployments.services import deployment_start
from deployments.tests.sandbox_helpers import Worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_deploys")]


def _wait(predicate, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def test_sigkilled_worker_redelivery_converges_on_one_succeeded_deployment(new_topology, operator, conn):
    import kube

    redis.Redis.from_url(settings.REDIS_URL).flushdb()  # this test's own Redis db: start from an empty queue
    topology = new_topology("qwen-gpu-nixl")
    first = Worker("first")
    try:
        deployment = deployment_start(topology=topology, actor=operator, source_ip=None)

        def caught() -> bool:
            row = Deployment.objects.get(pk=deployment.pk)
            return row.state in (State.APPLYING, State.WAITING) and row.pods_ready < max(row.pods_total, 1)

        _wait(caught, 30, "the first worker to be mid-deploy")
        first.kill()
    finally:
        first.stop()
    killed = Deployment.objects.get(pk=deployment.pk)
    assert killed.state in (State.APPLYING, State.WAITING) and killed.attempts == 1

    # Redis hands an unacknowledged message out again once it is older than the visibility timeout (4 s
    # here); a starting worker sweeps for such messages at once, later only every ~100 s. Start the new
    # worker as an operator would, after the old one is gone for longer than that (the reaper covers a
    # worker restarted sooner: tested in test_claim_and_reaper).
    time.sleep(4.5)
    second = Worker("second")
    try:
        done = _wait(
            lambda: Deployment.objects.filter(
                pk=deployment.pk, state__in=[State.SUCCEEDED, State.FAILED]
            ).first(),
            90,
            "the redelivered deployment to finish",
            interval=0.2,
        )
    finally:
        second.stop()
    assert done.state == State.SUCCEEDED, (done.error, done.diagnosis, "".join(second.lines[-30:]))
    assert done.attempts == 2
    assert Deployment.objects.filter(topology=topology).count() == 1
    assert any(s.message.startswith("Resumed by ") for s in done.steps.all())
    topology.refresh_from_db()
    assert topology.deployed_revision == topology.current_revision

    manifests = topology.current_revision.manifests
    live = {}
    for obj in manifests:
        meta = obj["metadata"]
        live[object_key(obj)] = kube.get_object(
            conn, obj["apiVersion"], obj["kind"], meta["namespace"], meta["name"]
        )
    assert manifest_differences(manifests, live) == []
    workloads = kube.list_objects(
        conn, "workload.serving.volcano.sh/v1alpha1", "ModelServing", topology.namespace
    )
    assert len(workloads) == 1 and workloads[0]["metadata"]["generation"] == 1
    pods = [p for p in kube.list_pods(conn, topology.namespace, f"tandem.io/topology={topology.pk}")]
    assert len([p for p in pods if not p.deletion_pending]) == done.pods_total
