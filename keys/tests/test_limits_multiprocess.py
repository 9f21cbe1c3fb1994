"""Limits hold exactly across processes: two uvicorn web processes and a Celery worker share Redis.

N requests are fired at once at both web processes (threads released together by a barrier); exactly
the limit succeed, the rest get 429 with Retry-After and a body naming the limit and its reset time.
Revocation and limit changes made through one process (or this one) reach the other on its next
request, although both hold the key in their in-process caches.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction

from audit.models import AuditEvent
from keys import limits, services
from keys.models import ApiKey
from keys.validation import LIMIT_FIELDS
from tests.support import celery_worker, subprocess_env, uvicorn_server

pytestmark = pytest.mark.django_db(transaction=True)

ME = "/api/v1/me/"


@pytest.fixture(scope="module")
def servers(django_db_setup: None, django_db_blocker: Any) -> Iterator[tuple[str, str]]:
    """Two web processes and a worker, started once for the module on the test database."""
    env = subprocess_env()
    with uvicorn_server(env) as a, uvicorn_server(env) as b, celery_worker(env) as worker:
        yield a, b
        assert worker.poll() is None, "the Celery worker exited during the tests"


def call(base: str, path: str, token: str, method: str = "GET", body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method)  # noqa: S310 - loopback only
    request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - loopback only
            return response.status, _headers(response.headers), json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, _headers(error.headers), json.loads(error.read() or b"null")


def _headers(headers: Any) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def fire(bases: tuple[str, str], token: str, count: int) -> list[tuple[int, dict[str, str], Any]]:
    """`count` GETs released at the same instant, alternating between the two web processes."""
    barrier = threading.Barrier(count)

    def one(index: int) -> tuple[int, dict[str, str], Any]:
        barrier.wait()
        return call(bases[index % 2], ME, token)  # type: ignore[no-any-return]

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(one, range(count)))


def fresh_minute(min_left: float = 10) -> datetime:
    """Start a fixed-window run early enough in a minute that it cannot straddle two windows."""
    now = datetime.now(UTC)
    if now.second + now.microsecond / 1e6 > 60 - min_left:
        time.sleep(60.2 - now.second - now.microsecond / 1e6)
    return datetime.now(UTC)


def make_key(user: Any, **given: Any) -> tuple[ApiKey, str]:
    issued = services.key_create(
        actor=user,
        name=f"limits-{time.monotonic_ns()}",
        purpose="automation",
        kind="management",
        scopes=["keys:read", "keys:write", "topologies:read"],
        alert_thresholds=given.pop("alert_thresholds", []),
        limits_given={field: given.get(field) for field in LIMIT_FIELDS},
    )
    return issued.key, issued.secret


def statuses(results: list[tuple[int, dict[str, str], Any]]) -> dict[int, int]:
    counted: dict[int, int] = {}
    for status, _, _ in results:
        counted[status] = counted.get(status, 0) + 1
    return counted


Result = tuple[int, dict[str, str], Any]


def assert_refusals_name(results: list[Result], limit: str, resets_at: datetime, since: datetime) -> None:
    """Each 429 names the limit and its reset; Retry-After is the wait until then (from when it was sent)."""
    refused = [r for r in results if r[0] == 429]
    assert refused
    for _, headers, body in refused:
        error = body["error"]
        assert error["code"] == "limit_exceeded"
        assert limit.replace("_", " ") in error["message"]
        assert f"it resets at {resets_at.isoformat()}" in error["message"], error["message"]
        retry_after = int(headers["retry-after"])
        assert 1 <= retry_after <= (resets_at - since).total_seconds() + 1


def test_requests_per_minute_hold_exactly_across_two_web_processes(servers, operator):
    limit, fired = 7, 20
    for _attempt in range(2):
        key, secret = make_key(operator, requests_per_minute=limit)
        started = fresh_minute()
        results = fire(servers, secret, fired)
        if datetime.now(UTC).replace(second=0, microsecond=0) != started.replace(second=0, microsecond=0):
            continue  # the burst straddled a minute (a very slow machine): two windows, try again
        assert statuses(results) == {200: limit, 429: fired - limit}
        window_end = started.replace(second=0, microsecond=0) + timedelta(minutes=1)
        assert_refusals_name(results, "requests_per_minute", window_end, started)
        assert limits.current_usage(str(key.pk), started)["requests_this_minute"] == limit
        return
    pytest.fail("every attempt straddled a minute boundary")


def test_daily_quota_holds_exactly_and_each_budget_threshold_alerts_once(servers, operator):
    quota, fired = 5, 14
    key, secret = make_key(operator, requests_per_day=quota, alert_thresholds=[60, 80])
    started = datetime.now(UTC)
    today = started.date()
    results = fire(servers, secret, fired)
    if datetime.now(UTC).date() != today:
        pytest.fail("the burst straddled midnight UTC; run again")
    assert statuses(results) == {200: quota, 429: fired - quota}
    midnight = datetime.combine(today + timedelta(days=1), datetime.min.time(), UTC)
    assert_refusals_name(results, "requests_per_day", midnight, started)

    # Exactly-once alerts: the web process whose request crossed 60 % and 80 % enqueued one task each;
    # the worker records them. Nothing more arrives however many processes saw the quota.
    def alerts() -> list[str]:
        events = AuditEvent.objects.filter(action="key.budget_alert", target_id=str(key.pk))
        return sorted(event.detail["label"] for event in events)

    deadline = time.monotonic() + 30
    while len(alerts()) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1)  # a duplicate would arrive now
    day = today.strftime("%Y%m%d")
    assert alerts() == [f"requests_per_day:{day}:60", f"requests_per_day:{day}:80"]


def test_max_concurrent_holds_exactly_across_two_web_processes(servers, operator):
    """Requests that passed the limit check are held (the owner lookup waits on a table lock taken
    here), so the slots they hold stay taken while the rest of the burst arrives."""
    allowed, fired = 3, 12
    key, secret = make_key(operator, max_concurrent=allowed)
    a, b = servers
    # Fill both processes' caches first: an uncached request would itself wait on the lock below.
    assert call(a, ME, secret)[0] == 200
    assert call(b, ME, secret)[0] == 200
    table = operator._meta.db_table
    barrier = threading.Barrier(fired)
    done: list[tuple[int, dict[str, str], Any]] = []

    def one(index: int) -> tuple[int, dict[str, str], Any]:
        barrier.wait()
        result = call(servers[index % 2], ME, secret)
        done.append(result)
        return result  # type: ignore[no-any-return]

    pool = ThreadPoolExecutor(max_workers=fired)
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE')
            futures = [pool.submit(one, i) for i in range(fired)]
            deadline = time.monotonic() + 20
            while len(done) < fired - allowed and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)  # nothing more may finish while the held requests hold their slots
            assert len(done) == fired - allowed, statuses(done)
            assert {r[0] for r in done} == {429}
            assert limits.current_usage(str(key.pk), datetime.now(UTC))["in_flight"] == allowed
        results = [f.result(timeout=30) for f in futures]
    finally:
        pool.shutdown(wait=True)
    assert statuses(results) == {200: allowed, 429: fired - allowed}
    for _, _, body in (r for r in results if r[0] == 429):
        assert body["error"]["code"] == "limit_exceeded"
        assert "max concurrent" in body["error"]["message"]
    # Every slot was released when its response was done.
    assert limits.current_usage(str(key.pk), datetime.now(UTC))["in_flight"] == 0
    assert call(b, ME, secret)[0] == 200


def test_revocation_through_one_process_refuses_the_next_request_on_the_other(servers, operator):
    a, b = servers
    key, secret = make_key(operator)
    assert call(a, ME, secret)[0] == 200
    assert call(b, ME, secret)[0] == 200  # both processes now hold the key in their caches
    status, _, _ = call(a, f"/api/v1/keys/{key.pk}/revoke/", secret, "POST", {"reason": "leaked"})
    assert status == 200
    status, headers, body = call(b, ME, secret)
    assert status == 401
    assert body["error"]["code"] == "key_revoked"
    assert headers["www-authenticate"].startswith("Bearer")
    assert call(a, ME, secret)[0] == 401


def test_a_limit_change_through_one_process_applies_at_once_on_the_other(servers, operator):
    a, b = servers
    key, secret = make_key(operator, requests_per_minute=100)
    started = fresh_minute(min_left=20)
    assert call(a, ME, secret)[0] == 200
    assert call(b, ME, secret)[0] == 200
    # The PATCH is this minute's third request; the new limit is what has been used: no more now.
    status, _, body = call(a, f"/api/v1/keys/{key.pk}/", secret, "PATCH", {"requests_per_minute": 3})
    assert status == 200, body
    assert body["requests_per_minute"] == 3
    status, _, body = call(b, ME, secret)
    assert status == 429, body
    assert "requests per minute limit (3)" in body["error"]["message"]
    # A change from a third process (this one, through the service) reaches both at once as well.
    services.key_update(key=key, actor=operator, changes={"requests_per_minute": 5})
    assert call(b, ME, secret)[0] == 200
    assert call(a, ME, secret)[0] == 200
    assert call(b, ME, secret)[0] == 429
    assert datetime.now(UTC).minute == started.minute, "crossed a minute; the counts above split"


def test_rotation_without_grace_through_one_process_stops_the_old_secret_on_the_other(servers, operator):
    a, b = servers
    key, secret = make_key(operator)
    assert call(a, ME, secret)[0] == 200
    assert call(b, ME, secret)[0] == 200
    status, _, body = call(a, f"/api/v1/keys/{key.pk}/rotate/", secret, "POST", {"grace_seconds": 0})
    assert status == 200, body
    status, _, refused = call(b, ME, secret)
    assert status == 401
    assert refused["error"]["code"] == "secret_rotated"
    assert call(b, ME, body["secret"])[0] == 200
    assert call(a, ME, body["secret"])[0] == 200
