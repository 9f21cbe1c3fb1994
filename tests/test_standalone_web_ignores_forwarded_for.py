"""The demo's web server (standalone.runner.web_command, the exact uvicorn command `make demo` runs)
does not believe X-Forwarded-For: spoofed addresses share one login-failure counter and never reach
the audit log."""

from __future__ import annotations

import http.cookiejar
import re
import subprocess
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest

from accounts import lockout
from accounts.models import User
from audit.models import AuditEvent
from standalone.runner import web_command
from tests.support import ROOT, free_port, http_get, stop, subprocess_env, wait_until

pytestmark = pytest.mark.django_db(transaction=True)
PASSWORD = "correct-horse-battery"
SPOOFED = ["203.0.113.10", "203.0.113.11", "203.0.113.12", "203.0.113.13", "203.0.113.14", "198.51.100.9"]


def _login(base: str, username: str, password: str, forwarded_for: str) -> str:
    """One browser-like login (GET the form for its CSRF token, then POST); returns the final URL path."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    headers = {"X-Forwarded-For": forwarded_for}
    first = urllib.request.Request(base + "/accounts/login/", headers=headers)  # noqa: S310 - loopback
    page = opener.open(first, timeout=10)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.read().decode())
    assert token is not None
    body = urllib.parse.urlencode(
        {"username": username, "password": password, "csrfmiddlewaretoken": token.group(1)}
    ).encode()
    request = urllib.request.Request(  # noqa: S310 - loopback only
        base + "/accounts/login/", data=body, headers={**headers, "Referer": base + "/accounts/login/"}
    )
    try:
        response = opener.open(request, timeout=10)
    except urllib.error.HTTPError as error:
        raise AssertionError(f"login POST answered {error.code}") from None
    return urllib.parse.urlparse(response.geturl()).path


def test_spoofed_forwarded_for_gets_no_fresh_failure_counter_and_stays_out_of_the_audit_log():
    username = f"demo-{uuid.uuid4().hex[:8]}"
    User.objects.create_user(username=username, password=PASSWORD, role="viewer")
    port = free_port()
    env = subprocess_env(LOGIN_FAILURE_LIMIT="5", LOGIN_LOCKOUT_SECONDS="600", LOG_LEVEL="warning")
    proc = subprocess.Popen(
        web_command(port),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: http_get(base + "/healthz", timeout=1)[0] == 200, 30, "demo web server", proc)
        for address in SPOOFED[:5]:
            assert _login(base, username, "wrong-password", address) == "/accounts/login/"
        # Had each spoofed address its own counter, this right password would log in.
        assert _login(base, username, PASSWORD, SPOOFED[5]) == "/accounts/login/"
    finally:
        stop(proc)
        lockout.clear(username, "127.0.0.1")
    events = AuditEvent.objects.filter(actor_label=username)
    assert events.filter(action="auth.lockout").count() == 1
    assert not events.filter(action="auth.login").exists()
    assert set(events.values_list("source_ip", flat=True)) == {"127.0.0.1"}
