"""PostgreSQL restarted under a running Tandem (a private cluster, initdb'd for this test only): /readyz and
the API say the database is unavailable (503, not 500) while it is down; a deploy task that arrives then
retries with back-off and, once the database is back, runs to one succeeded deployment; what was stored
before the restart is all still there."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import pytest

from deployments.tests.sandbox_helpers import Worker
from standalone.api import ApiError, TandemApi
from tests.faults.sandbox_fixtures import lab_sandbox  # noqa: F401 - fixture
from tests.faults.services import private_postgres, private_redis
from tests.support import ROOT, http_get, subprocess_env, uvicorn_server, wait_until

PASSWORD = "correct-horse-battery-staple"

SEED = """
import json
from accounts.models import User
from clusters.services import cluster_register
from topologies.presets import preset_spec
from topologies.services import topology_create
admin = User.objects.create_user(username="admin", password={password!r}, role="admin")
cluster = cluster_register(name="sandbox", server={server!r}, token={token!r})
spec = preset_spec("qwen-gpu-nixl", namespace={namespace!r})
topology = topology_create(cluster=cluster, spec=spec, actor=admin)
print(json.dumps({{"topology": topology.pk}}))
"""


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.mark.timeout(180)
def test_postgres_restart_fails_readiness_then_tasks_retry_and_nothing_is_lost(lab_sandbox):  # noqa: F811
    namespace = f"pg{uuid.uuid4().hex[:8]}"
    with private_postgres() as pg, private_redis() as redis_server:
        env = subprocess_env(
            DATABASE_URL=pg.url(),
            REDIS_URL=redis_server.url,
            DB_CONN_MAX_AGE="60",
            PASSWORD_HASH_ITERATIONS="1000",
        )
        _manage(env, "migrate", "--no-input", "-v", "0")
        seed = SEED.format(
            password=PASSWORD, server=lab_sandbox.server, token=lab_sandbox.token, namespace=namespace
        )
        topology_id = json.loads(_manage(env, "shell", "-c", seed).strip().splitlines()[-1])["topology"]
        with uvicorn_server(env) as base:
            api = TandemApi(base)
            api.login("admin", PASSWORD)
            deployment = api.post(f"/api/v1/topologies/{topology_id}/deploy/")

            pg.stop()
            status, body = http_get(base + "/readyz", timeout=5)
            assert status == 503 and "database" in body, body
            with pytest.raises(ApiError) as refused:
                api.get(f"/api/v1/deployments/{deployment['id']}/")
            assert refused.value.status == 503 and "database_unavailable" in str(refused.value)

            # The worker starts while the database is down: the deploy task fails to claim and retries.
            worker = Worker("pg-restart", DATABASE_URL=pg.url(), REDIS_URL=redis_server.url)
            try:
                wait_until(lambda: any("Retry in" in line for line in worker.lines), 30, "the task to retry")
                pg.start()
                wait_until(
                    lambda: http_get(base + "/readyz", timeout=5)[0] == 200, 20, "readyz after PostgreSQL"
                )
                deadline = time.monotonic() + 90
                while time.monotonic() < deadline:
                    row = api.get(f"/api/v1/deployments/{deployment['id']}/")
                    if row["state"] in ("succeeded", "failed", "rolled_back"):
                        break
                    time.sleep(0.5)
            finally:
                worker.stop()
            assert row["state"] == "succeeded", (row, "".join(worker.lines[-30:]))
            listed = api.get(f"/api/v1/deployments/?topology={topology_id}")["results"]
            assert [d["id"] for d in listed] == [deployment["id"]]
            topology = api.get(f"/api/v1/topologies/{topology_id}/")
            assert topology["deployed_revision"] == topology["current_revision"] == 1
            assert api.get("/api/v1/clusters/")["results"][0]["name"] == "sandbox"
    lab_sandbox.kubectl(
        "delete", "modelroutes,modelservers,modelservings", "--all", "-n", namespace, "--wait=false"
    )
