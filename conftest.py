"""Project-wide fixtures: users in each role, and a loud failure when a service is down."""

from __future__ import annotations

import socket
from urllib.parse import urlparse

import pytest
from django.conf import settings

START_HINTS = {
    "PostgreSQL": "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
    "Redis": "redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save '' --appendonly no",
}


def _reachable(url: str, default_port: int) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection(
            (parsed.hostname or "127.0.0.1", parsed.port or default_port), timeout=2
        ):
            return True
    except OSError:
        return False


def pytest_sessionstart(session: pytest.Session) -> None:
    db = settings.DATABASES["default"]
    missing = []
    if db["ENGINE"].endswith("postgresql") and not _reachable(
        f"postgres://{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}", 5432
    ):
        missing.append("PostgreSQL")
    if not _reachable(settings.REDIS_URL, 6379):
        missing.append("Redis")
    if missing:
        hints = "; ".join(f"{name}: {START_HINTS[name]}" for name in missing)
        raise pytest.UsageError(f"the test suite needs {', '.join(missing)} running; start with: {hints}")
    _empty_redis()


def _empty_redis() -> None:
    """Each run starts from an empty Redis database (its own: ``tests/parallel.py`` gives each worker one).
    A previous run's queued tasks, live snapshots and counters are keyed by ids that this run's new test
    database hands out again (the last lane's topology 1 is this lane's topology 1); left there, a page
    would show another run's live figures and a worker would run another run's queued jobs."""
    import redis

    redis.Redis.from_url(settings.REDIS_URL).flushdb()


@pytest.fixture(scope="session", autouse=True)
def _no_connection_outlives_the_run(django_db_setup, django_db_blocker):  # type: ignore[no-untyped-def]
    """The processes the tests start (servers, workers) may still be closing their connections when the
    run ends; end them, so that the test database is dropped instead of left with a warning."""
    yield
    from django.db import connection

    db = connection.settings_dict
    if db["NAME"] != (db.get("TEST") or {}).get("NAME"):  # no test here used the database
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture
def make_user(db):  # type: ignore[no-untyped-def]
    from accounts.models import User

    def make(role: str = "viewer", username: str | None = None, password: str = "correct-horse-battery"):
        name = username or f"{role}-user"
        return User.objects.create_user(username=name, password=password, role=role)

    return make


@pytest.fixture
def viewer(make_user):  # type: ignore[no-untyped-def]
    return make_user("viewer")


@pytest.fixture
def operator(make_user):  # type: ignore[no-untyped-def]
    return make_user("operator")


@pytest.fixture
def admin_user(make_user):  # type: ignore[no-untyped-def]
    return make_user("admin")


@pytest.fixture
def api_client():  # type: ignore[no-untyped-def]
    from rest_framework.test import APIClient

    return APIClient()


# Browser tests (pytest-playwright) drive the system Chromium; Playwright's own download is never used.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):  # type: ignore[no-untyped-def]
    return {**browser_type_launch_args, "executable_path": "/usr/bin/chromium", "args": CHROMIUM_ARGS}


# Sandbox clusters (an emulated Kubernetes API + controllers in a subprocess; see sandbox/README.md).
@pytest.fixture(scope="session")
def sandbox_cluster():  # type: ignore[no-untyped-def]
    from sandbox.testing import SandboxCluster

    with SandboxCluster(nodes=4, accelerators=["huawei.com/ascend-1980=8"]) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def sandbox_cluster_no_kthena():  # type: ignore[no-untyped-def]
    from sandbox.testing import SandboxCluster

    with SandboxCluster(nodes=4, accelerators=["huawei.com/ascend-1980=8"], kthena=False) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def sandbox_cluster_tls():  # type: ignore[no-untyped-def]
    from sandbox.testing import SandboxCluster

    with SandboxCluster(nodes=4, accelerators=["huawei.com/ascend-1980=8"], tls=True) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def sandbox_cluster_isolated():  # type: ignore[no-untyped-def]
    """Pods in a network namespace the host cannot reach: only the API server and LoadBalancer
    addresses answer from here, as with a remote cluster (needs root, like CI)."""
    from sandbox.testing import SandboxCluster

    with SandboxCluster(
        nodes=4, accelerators=["huawei.com/ascend-1980=8"], pod_network="isolated"
    ) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def prometheus_isolated(sandbox_cluster_isolated):  # type: ignore[no-untyped-def]
    """A real Prometheus (Debian's package) on the isolated sandbox's pod network, scraping every pod
    each second, reachable from the host only through its LoadBalancer Service (``.url``)."""
    from sandbox.monitoring import SandboxPrometheus

    with SandboxPrometheus(sandbox_cluster_isolated, scrape_interval="1s") as prometheus:
        yield prometheus


# The API contract: every answer under /api/ that a test sees must match the OpenAPI document
# (tests/schema_contract.py); a mismatch fails the test that saw it.
@pytest.fixture(autouse=True)
def _api_answers_match_the_schema():  # type: ignore[no-untyped-def]
    from tests import schema_contract

    schema_contract.install()
    schema_contract.problems.clear()
    yield
    found = list(schema_contract.problems)
    schema_contract.problems.clear()
    if found:
        pytest.fail("API answers that do not match /api/v1/schema/:\n" + "\n".join(found), pytrace=False)
