"""A deploy worker SIGKILLed mid-deploy is resumed by the next worker; a Redis restart (a private
redis-server: the queued task is lost with it) is survived: /readyz names Redis while it is down, and
beat's reaper hands the still-queued job to a worker once Redis is back. Each ends with one succeeded
deployment, as the API shows it and as it is stored."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from deployments.models import Deployment, State
from deployments.tests.sandbox_helpers import Worker
from tests.faults.sandbox_fixtures import *  # noqa: F403
from tests.faults.services import private_redis
from tests.faults.web import Browser
from tests.support import ROOT, http_get, subprocess_env, uvicorn_server, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_deploys")]


def _wait_state(deployment_id: int, states, timeout: float) -> Deployment:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = Deployment.objects.get(pk=deployment_id)
        if row.state in states:
            return row
        time.sleep(0.2)
    raise AssertionError(f"deployment {deployment_id} still {Deployment.objects.get(pk=deployment_id).state}")


def test_worker_sigkilled_mid_deploy_is_resumed_to_one_succeeded_deployment(new_topology, operator):
    with private_redis() as redis_server:
        broker = {"REDIS_URL": redis_server.url}
        topology = new_topology("qwen-gpu-nixl")
        first = Worker("first", **broker)
        try:
            with uvicorn_server(subprocess_env(**broker)) as base:
                answer = Browser.logged_in(base, operator).post(f"/api/v1/topologies/{topology.pk}/deploy/")
            assert answer.status in (201, 202), answer.body
            deployment = _wait_state(answer.json()["id"], (State.APPLYING, State.WAITING), 30)
            first.kill()
        finally:
            first.stop()
        assert Deployment.objects.get(pk=deployment.pk).attempts == 1
        time.sleep(4.5)  # past the visibility timeout (4 s): Redis hands the unacknowledged task out again
        second = Worker("second", **broker)
        try:
            done = _wait_state(deployment.pk, (State.SUCCEEDED, State.FAILED, State.ROLLED_BACK), 90)
        finally:
            second.stop()
    assert done.state == State.SUCCEEDED, (done.error, "".join(second.lines[-20:]))
    assert done.attempts == 2 and any(s.message.startswith("Resumed by ") for s in done.steps.all())
    assert Deployment.objects.filter(topology=topology).count() == 1
    topology.refresh_from_db()
    assert topology.deployed_revision == topology.current_revision


def test_redis_restart_loses_the_queue_but_not_the_deploy(new_topology, operator, tmp_path):
    topology = new_topology("qwen-gpu-nixl")
    with private_redis() as redis_server:
        env = subprocess_env(REDIS_URL=redis_server.url)
        with uvicorn_server(env) as base:
            answer = Browser.logged_in(base, operator).post(f"/api/v1/topologies/{topology.pk}/deploy/")
            assert answer.status in (201, 202), answer.body
            deployment_id = answer.json()["id"]

            redis_server.stop()  # nothing persisted: the queued task is gone with it
            status, body = http_get(base + "/readyz", timeout=5)
            assert status == 503 and "redis" in body, body
            redis_server.start()
            wait_until(lambda: http_get(base + "/readyz", timeout=5)[0] == 200, 10, "readyz after Redis")
        assert Deployment.objects.get(pk=deployment_id).state == State.QUEUED

        beat_env = {**env, "DEPLOY_HEARTBEAT_STALE_SECONDS": "3"}
        beat = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "controlplane",
                "beat",
                "-s",
                str(tmp_path / "beat"),
                "--loglevel",
                "WARNING",
            ],
            cwd=ROOT,
            env=beat_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        worker = Worker("after-restart", REDIS_URL=redis_server.url)
        try:
            done = _wait_state(deployment_id, (State.SUCCEEDED, State.FAILED, State.ROLLED_BACK), 90)
        finally:
            worker.stop()
            beat.terminate()
            beat.wait(10)
    assert done.state == State.SUCCEEDED, (done.error, "".join(worker.lines[-20:]))
    assert Deployment.objects.filter(topology=topology).count() == 1
    topology.refresh_from_db()
    assert topology.deployed_revision == topology.current_revision
