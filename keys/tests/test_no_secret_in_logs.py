"""A key's whole life leaves its secret nowhere but the two responses that hand it out.

Real processes at debug level: a uvicorn web process, a Celery worker and beat (rolling usage up every
second), and the `create_api_key` command; everything each writes is captured. The key is created,
used, sent garbled in the ways people get it wrong, rotated, used in its grace period, limited (429),
revoked and used again. Neither the secrets nor any 10-character run of their random parts may appear
in a log line, a response (other than the create and rotate bodies) or an audit entry.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from accounts.models import User
from audit.models import AuditEvent
from keys import limits, tokens
from keys.models import ApiKey
from tests.support import (
    ROOT,
    VENV_BIN,
    celery_beat,
    celery_worker,
    subprocess_env,
    uvicorn_server,
    wait_until,
)

pytestmark = pytest.mark.django_db(transaction=True)

WINDOW = 10  # no run this long of a secret's random part may leak (display prefixes show 4)


@dataclass
class Exchange:
    label: str
    status: int
    headers: str
    body: str


@dataclass
class Client:
    base: str
    exchanges: list[Exchange] = field(default_factory=list)

    def send(
        self,
        label: str,
        method: str,
        path: str,
        authorization: str | None,
        body: dict[str, Any] | None = None,
    ) -> tuple[int, Any]:
        url = urlparse(self.base)
        conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=30)
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if authorization is not None:
            headers["Authorization"] = authorization
        conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        response = conn.getresponse()
        text = response.read().decode()
        conn.close()
        self.exchanges.append(
            Exchange(label, response.status, "\n".join(f"{k}: {v}" for k, v in response.getheaders()), text)
        )
        return response.status, json.loads(text) if text else None


def leaks(secret: str, text: str) -> list[str]:
    """The secret itself or any WINDOW-long run of its random part, where they occur in `text`."""
    random_part = secret[len(tokens.PREFIX) + 2 : len(tokens.PREFIX) + 2 + tokens.RANDOM_LENGTH]
    found = [secret] if secret in text else []
    for start in range(len(random_part) - WINDOW + 1):
        run = random_part[start : start + WINDOW]
        at = text.find(run)
        if at >= 0:
            found.append(text[max(0, at - 80) : at + 40])
            break
    return found


def checksum_broken(secret: str) -> str:
    last = secret[-1]
    return secret[:-1] + ("A" if last != "A" else "B")


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[dict[str, Path]]:
    paths = {name: tmp_path / f"{name}.log" for name in ("web", "worker", "beat", "command")}
    yield paths


def forget_recent_failures() -> None:
    """Failed authentications per address are audited up to a number a minute; start from none."""
    r = limits.client()
    for name in r.scan_iter(match=limits.counter_key("auth-failures", "*", "*")):
        r.delete(name)


def test_a_keys_whole_life_leaves_no_secret_in_logs_responses_or_audit(logs, tmp_path):
    forget_recent_failures()
    User.objects.create_user(username="ci-admin", password="correct-horse-battery", role="admin")
    env = subprocess_env(LOG_LEVEL="debug", KEYS_USAGE_ROLLUP_SECONDS="1")
    bootstrap = subprocess.run(
        [
            str(VENV_BIN / "python"),
            "manage.py",
            "create_api_key",
            "--user",
            "ci-admin",
            "--purpose",
            "automation",
            "--kind",
            "management",
            "--scopes",
            "keys:read,keys:write,keys:admin,topologies:read",
            "--expires-in",
            "2d",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        check=True,
    )
    logs["command"].write_bytes(bootstrap.stderr)
    admin_secret = bootstrap.stdout.decode().removesuffix("\n")
    assert tokens.parse(admin_secret).kind == "management"  # stdout is the secret and nothing else

    with (
        logs["web"].open("wb") as web_out,
        logs["worker"].open("wb") as worker_out,
        logs["beat"].open("wb") as beat_out,
        uvicorn_server(env, log_level="debug", output=web_out) as base,
        celery_worker(env, log_level="DEBUG", output=worker_out) as worker,
        celery_beat(env, tmp_path / "beat-schedule", log_level="DEBUG", output=beat_out) as beat,
    ):
        client = Client(base)
        admin = f"Bearer {admin_secret}"
        status, issued = client.send(
            "create",
            "POST",
            "/api/v1/keys/",
            admin,
            {
                "name": "ci-pipeline",
                "purpose": "automation",
                "kind": "management",
                "scopes": ["keys:read", "keys:write", "topologies:read"],
                "requests_per_minute": 1000,
                "requests_per_day": 10,
                "alert_thresholds": [10],
            },
        )
        assert status == 201, issued
        secret, key_id = issued["secret"], issued["key"]["id"]
        bearer = f"Bearer {secret}"

        assert client.send("use me", "GET", "/api/v1/me/", bearer)[0] == 200
        assert client.send("use list", "GET", "/api/v1/keys/", bearer)[0] == 200
        assert client.send("use get", "GET", f"/api/v1/keys/{key_id}/", bearer)[0] == 200
        assert client.send("use topologies", "GET", "/api/v1/topologies/", bearer)[0] == 200
        assert client.send("missing scope", "GET", "/api/v1/clusters/", bearer)[0] == 403
        fake_inference = tokens.generate("inference")
        garbled = {
            "double space": f"Bearer  {secret}",
            "bearer doubled": f"Bearer Bearer {secret}",
            "bearer missing": secret,
            "wrong scheme": f"Token {secret}",
            "basic scheme": f"Basic {secret}",
            "truncated": f"Bearer {secret[:-3]}",
            "one character more": f"Bearer {secret}x",
            "checksum broken": f"Bearer {checksum_broken(secret)}",
            "lowercase": f"bearer {secret.lower()}",
            "unknown key of the other kind": f"Bearer {fake_inference}",
            "same random part, other kind": (
                "Bearer "
                + (body := "tdm_i_" + secret[len(tokens.PREFIX) + 2 : -tokens.CHECKSUM_LENGTH])
                + tokens.checksum(body)
            ),
        }
        for label, header in garbled.items():
            status, answer = client.send(label, "GET", "/api/v1/me/", header)
            assert status in (401, 403), (label, status, answer)
        # A key put in the query string instead of the header: refused, and the URL is logged.
        assert client.send("in query", "GET", f"/api/v1/me/?api_key={secret}", None)[0] in (401, 403)

        status, rotated = client.send(
            "rotate", "POST", f"/api/v1/keys/{key_id}/rotate/", bearer, {"grace_seconds": 3600}
        )
        assert status == 200, rotated
        new_secret = rotated["secret"]
        new_bearer = f"Bearer {new_secret}"
        assert client.send("old within grace", "GET", "/api/v1/me/", bearer)[0] == 200
        assert client.send("new", "GET", "/api/v1/me/", new_bearer)[0] == 200

        status, _ = client.send(
            "limit to 1/min", "PATCH", f"/api/v1/keys/{key_id}/", new_bearer, {"requests_per_minute": 1}
        )
        assert status == 200
        codes = [client.send("over the limit", "GET", "/api/v1/me/", new_bearer)[0] for _ in range(2)]
        assert 429 in codes

        status, _ = client.send(
            "revoke", "POST", f"/api/v1/keys/{key_id}/revoke/", admin, {"reason": "end of life"}
        )
        assert status == 200
        assert client.send("new after revoke", "GET", "/api/v1/me/", new_bearer)[0] == 401
        assert client.send("old after revoke", "GET", "/api/v1/me/", bearer)[0] == 401
        assert (
            client.send(
                "checksum broken after revoke", "GET", "/api/v1/me/", f"Bearer {checksum_broken(new_secret)}"
            )[0]
            == 401
        )

        # The worker ran the budget alert (10 % of the day's 10 requests) and beat's roll-ups reached it.
        wait_until(
            lambda: (
                ApiKey.objects.filter(pk=key_id, last_used_at__isnull=False).exists()
                and AuditEvent.objects.filter(action="key.budget_alert", target_id=key_id).exists()
            ),
            30,
            "usage roll-up and budget alert",
            worker,
        )
        assert beat.poll() is None
        time.sleep(1.5)  # one more roll-up, with its log lines

    outputs = {name: path.read_text(errors="replace") for name, path in logs.items()}
    assert "GET /api/v1/me/" in outputs["web"], "the web process's access log was not captured"
    assert "keys.tasks.rollup_key_usage" in outputs["beat"], "beat logged no roll-up it sent"
    assert "keys.tasks.key_budget_alert" in outputs["worker"], "the worker logged no task it ran"
    handed_out = {"create": secret, "rotate": new_secret}
    for owner_secret in (admin_secret, secret, new_secret):
        for name, text in outputs.items():
            assert not leaks(owner_secret, text), f"a secret in the {name} log: {leaks(owner_secret, text)}"
        for exchange in client.exchanges:
            assert not leaks(owner_secret, exchange.headers), f"a secret in the headers of {exchange.label}"
            if handed_out.get(exchange.label) == owner_secret:
                continue
            assert not leaks(owner_secret, exchange.body), f"a secret in the response to {exchange.label}"
        for event in AuditEvent.objects.all():
            text = json.dumps(
                [event.action, event.actor_label, event.target_label, event.target_id, event.detail],
                default=str,
            )
            assert not leaks(owner_secret, text), f"a secret in the audit entry {event.action}"
    # The create and rotate bodies did hand the secret out (exactly where it belongs).
    bodies = {e.label: e.body for e in client.exchanges}
    assert secret in bodies["create"] and new_secret in bodies["rotate"]
    failures = [e.detail["reason"] for e in AuditEvent.objects.filter(action="key.auth_failed")]
    assert len(failures) >= len(garbled) + 3, failures  # every refusal was audited, none with a secret


def test_worker_and_beat_log_through_the_redacting_handler_tracebacks_included(tmp_path):
    """Celery replaces the root log handlers at start unless told otherwise; the project's redaction
    must survive that. A task handed a token by mistake fails with the token in its exception."""
    from keys.tasks import key_budget_alert

    env = subprocess_env(LOG_LEVEL="debug")
    leaked = tokens.generate("management")
    worker_log, beat_log = tmp_path / "worker.log", tmp_path / "beat.log"
    with (
        worker_log.open("wb") as worker_out,
        beat_log.open("wb") as beat_out,
        celery_worker(env, log_level="DEBUG", output=worker_out) as worker,
        celery_beat(env, tmp_path / "beat-schedule", log_level="DEBUG", output=beat_out),
    ):
        key_budget_alert.delay(leaked, "requests_per_day:20260101:80")
        wait_until(
            lambda: "key_budget_alert" in worker_log.read_text() and "raised" in worker_log.read_text(),
            30,
            "the worker to run the task",
            worker,
        )
        time.sleep(0.5)
    worker_text, beat_text = worker_log.read_text(), beat_log.read_text()
    assert "is not a valid UUID" in worker_text  # the exception and its traceback were logged
    assert "tdm_[redacted]" in worker_text
    assert not leaks(leaked, worker_text), leaks(leaked, worker_text)
    # Celery's own format ("[time: LEVEL/MainProcess]") means its handler, which redacts nothing.
    for name, text in (("worker", worker_text), ("beat", beat_text)):
        assert "/MainProcess]" not in text, f"{name} logs through Celery's handler, not the project's"
        assert " celery." in text, f"{name} logged nothing through the project's handler"
