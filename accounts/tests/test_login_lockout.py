from __future__ import annotations

import uuid

import pytest
from django.urls import reverse

from accounts import lockout
from audit.models import AuditEvent

PASSWORD = "correct-horse-battery"


@pytest.fixture
def target_user(make_user, settings):
    settings.LOGIN_FAILURE_LIMIT = 3
    settings.LOGIN_LOCKOUT_SECONDS = 600
    user = make_user("viewer", username=f"lock-{uuid.uuid4().hex[:8]}")
    yield user
    for ip in ("127.0.0.1", "10.9.9.9", "203.0.113.7"):
        lockout.clear(user.username, ip)


def _login(client, username, password, **extra):
    return client.post(reverse("accounts:login"), {"username": username, "password": password}, **extra)


def test_login_page_logs_in_and_audits_source_ip(client, target_user):
    response = _login(client, target_user.username, PASSWORD)
    assert response.status_code == 302
    event = AuditEvent.objects.get(action="auth.login")
    assert event.actor == target_user
    assert event.source_ip == "127.0.0.1"


def test_failed_logins_lock_the_pair_out_with_a_clear_message(client, target_user):
    for _ in range(3):
        response = _login(client, target_user.username, "wrong-password")
        assert response.status_code == 200
    response = _login(client, target_user.username, PASSWORD)
    assert response.status_code == 200
    assert "Too many failed attempts; try again in 10 minutes." in response.content.decode()
    assert "_auth_user_id" not in client.session
    actions = list(AuditEvent.objects.order_by("id").values_list("action", flat=True))
    assert actions.count("auth.lockout") == 1
    assert actions.count("auth.login_failed") == 4  # three bad passwords, then the refused good one
    lock = AuditEvent.objects.get(action="auth.lockout")
    assert lock.source_ip == "127.0.0.1"
    assert lock.actor_label == target_user.username


def test_lockout_is_per_address_so_others_can_still_log_in(client, target_user):
    for _ in range(3):
        _login(client, target_user.username, "wrong-password")
    response = _login(client, target_user.username, PASSWORD, REMOTE_ADDR="10.9.9.9")
    assert response.status_code == 302


def test_successful_login_resets_the_failure_count(client, target_user):
    _login(client, target_user.username, "wrong-password")
    _login(client, target_user.username, "wrong-password")
    assert _login(client, target_user.username, PASSWORD).status_code == 302
    client.logout()
    _login(client, target_user.username, "wrong-password")
    _login(client, target_user.username, "wrong-password")
    assert _login(client, target_user.username, PASSWORD).status_code == 302


def test_lockout_also_guards_the_admin_site_login(client, target_user):
    for _ in range(3):
        _login(client, target_user.username, "wrong-password")
    target_user.is_staff = True
    target_user.save()
    response = client.post(
        "/admin/login/", {"username": target_user.username, "password": PASSWORD, "next": "/admin/"}
    )
    assert response.status_code == 200
    assert "_auth_user_id" not in client.session


def test_forwarded_for_is_ignored_unless_the_peer_is_a_trusted_proxy(client, target_user, settings):
    _login(client, target_user.username, "wrong-password", HTTP_X_FORWARDED_FOR="203.0.113.7")
    assert AuditEvent.objects.get(action="auth.login_failed").source_ip == "127.0.0.1"
    AuditEvent.objects.all().delete()
    settings.TRUSTED_PROXIES = ["127.0.0.1"]
    _login(client, target_user.username, "wrong-password", HTTP_X_FORWARDED_FOR="203.0.113.7")
    assert AuditEvent.objects.get(action="auth.login_failed").source_ip == "203.0.113.7"


def test_logout_is_audited(client, target_user):
    _login(client, target_user.username, PASSWORD)
    client.post(reverse("accounts:logout"))
    assert AuditEvent.objects.filter(action="auth.logout", actor=target_user).count() == 1


def test_lockout_message_rounds_up_to_minutes():
    assert lockout.lockout_message(61) == "Too many failed attempts; try again in 2 minutes."
    assert lockout.lockout_message(5) == "Too many failed attempts; try again in 1 minute."
