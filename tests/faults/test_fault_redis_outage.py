"""Redis hung (SIGSTOP) or refusing: pages and reads that do not need Redis keep answering quickly; writes
that enqueue work (deploy, scale) fail fast with a 503 naming Redis and leave nothing behind; login fails
closed (its lockout counters live in Redis). Runs a real uvicorn against a private redis-server."""

from __future__ import annotations

import pytest

from telemetry.tests.conftest import build  # noqa: F401 - fixture
from tests.faults.services import private_redis
from tests.faults.web import Browser
from tests.support import subprocess_env, uvicorn_server

pytestmark = pytest.mark.django_db(transaction=True)

# Each answer must come well inside what a person waits for; the Redis deadline is 1 s (0.5 s here).
QUICK = 5.0


@pytest.fixture
def redis_server():
    with private_redis() as server:
        yield server


@pytest.fixture
def topology(admin_user, build):  # noqa: F811 - the telemetry fixture
    import time

    from clusters.models import Cluster
    from telemetry.models import LatestSnapshot
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    cluster = Cluster.objects.create(name="lab", auth_method="token", server="http://127.0.0.1:9")
    topology = topology_create(cluster=cluster, spec=preset_spec("qwen-gpu-nixl"), actor=admin_user)
    snapshot, _, _ = build(topology.pk, time.time())
    from django.utils import timezone

    LatestSnapshot.objects.create(topology=topology, ts=timezone.now(), data=snapshot)  # read without Redis
    return topology


def _stored(topology) -> tuple[int, int]:
    from deployments.models import Deployment

    return Deployment.objects.filter(topology=topology).count(), topology.revisions.count()


def _assert_redis_503(answer, what: str) -> None:
    assert answer.status == 503, f"{what}: {answer.status} {answer.body[:300]}"
    assert answer.seconds < QUICK, f"{what} took {answer.seconds:.1f} s"
    error = answer.json()["error"]
    assert error["code"] == "redis_unavailable"
    assert "Redis" in error["message"]


@pytest.mark.parametrize("outage", ["hung", "refusing"])
def test_redis_outage_keeps_reads_up_and_refuses_writes_cleanly(redis_server, topology, operator, outage):
    env = subprocess_env(
        REDIS_URL=redis_server.url, REDIS_SOCKET_TIMEOUT_SECONDS="0.5", REDIS_CONNECT_TIMEOUT_SECONDS="0.5"
    )
    with uvicorn_server(env) as base:
        browser = Browser.logged_in(base, operator)
        assert browser.get("/").status == 200  # warm: connections to Redis exist before it hangs
        if outage == "hung":
            redis_server.freeze()
        else:
            redis_server.stop()
        try:
            before = _stored(topology)
            for path in (
                "/",
                f"/topologies/{topology.pk}/",
                f"/api/v1/topologies/{topology.pk}/metrics/latest/",
            ):
                answer = browser.get(path)
                assert answer.status == 200, f"{path}: {answer.status} {answer.body[:300]}"
                assert answer.seconds < QUICK, f"{path} took {answer.seconds:.1f} s with Redis {outage}"

            _assert_redis_503(browser.post(f"/api/v1/topologies/{topology.pk}/deploy/"), "deploy")
            _assert_redis_503(
                browser.post(f"/api/v1/topologies/{topology.pk}/scale/", {"role": "decode", "replicas": 3}),
                "scale",
            )
            assert _stored(topology) == before, "a refused write left a deployment or a revision behind"

            # Login fails closed: the lockout counters cannot be read, so no password is checked.
            login = Browser(base).post(
                "/accounts/login/",
                {"username": operator.username, "password": "correct-horse-battery"},
                form=True,
            )
            assert login.status == 503 and login.seconds < QUICK, (login.status, login.seconds)
            assert "Redis" in login.body and "sessionid" not in login.body
        finally:
            if outage == "hung":
                redis_server.thaw()
            else:
                redis_server.start()

        # Redis back: the same write succeeds and is stored once.
        answer = browser.post(f"/api/v1/topologies/{topology.pk}/deploy/")
        assert answer.status in (201, 202), (answer.status, answer.body[:400])
        assert _stored(topology) == (before[0] + 1, before[1])


def test_a_deploy_whose_task_redis_refuses_after_the_check_is_saved_and_says_so(
    redis_server, topology, operator
):
    """Redis answers PING but refuses writes (out of memory): the job is committed, the client is told it
    is queued, and its timeline says the task was not taken; the reaper re-sends it once Redis recovers."""
    import redis

    from deployments.models import Deployment, State

    with uvicorn_server(subprocess_env(REDIS_URL=redis_server.url)) as base:
        browser = Browser.logged_in(base, operator)
        assert browser.get("/").status == 200
        redis.Redis.from_url(redis_server.url).config_set("maxmemory", 1)
        answer = browser.post(f"/api/v1/topologies/{topology.pk}/deploy/")
    assert answer.status in (201, 202), answer.body
    deployment = Deployment.objects.get(pk=answer.json()["id"])
    assert deployment.state == State.QUEUED
    steps = [s.message for s in deployment.steps.order_by("pk")]
    assert "Saved, but Redis did not take the job; it starts when Redis is back" in steps
