from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from accounts.models import User
from accounts.roles import Role

pytestmark = pytest.mark.django_db


def _run(*args: str) -> str:
    out = StringIO()
    call_command("createadmin", *args, stdout=out)
    return out.getvalue()


def test_createadmin_generates_and_prints_a_password_that_works():
    output = _run("--username", "root-admin")
    assert "admin root-admin: created" in output
    password = output.split("password: ", 1)[1].strip()
    user = User.objects.get(username="root-admin")
    assert user.role == Role.ADMIN
    assert user.check_password(password)


def test_createadmin_reads_the_password_from_the_named_variable(monkeypatch):
    monkeypatch.setenv("TANDEM_ADMIN_PASSWORD", "a-very-long-admin-secret")
    output = _run("--username", "ops", "--password-from-env", "TANDEM_ADMIN_PASSWORD")
    assert "password:" not in output
    assert User.objects.get(username="ops").check_password("a-very-long-admin-secret")


def test_createadmin_leaves_an_existing_user_alone(monkeypatch):
    _run("--username", "ops")
    monkeypatch.setenv("NEW_PASSWORD", "another-long-admin-secret")
    output = _run("--username", "ops", "--password-from-env", "NEW_PASSWORD")
    assert "admin ops: unchanged" in output
    assert not User.objects.get(username="ops").check_password("another-long-admin-secret")


def test_createadmin_resets_the_password_only_when_asked(monkeypatch):
    _run("--username", "ops")
    monkeypatch.setenv("NEW_PASSWORD", "another-long-admin-secret")
    output = _run("--username", "ops", "--password-from-env", "NEW_PASSWORD", "--reset-password")
    assert "admin ops: password reset" in output
    assert User.objects.get(username="ops").check_password("another-long-admin-secret")


def test_createadmin_refuses_an_empty_variable_and_a_weak_password(monkeypatch):
    monkeypatch.setenv("EMPTY", "")
    with pytest.raises(CommandError, match="EMPTY is empty"):
        _run("--password-from-env", "EMPTY")
    monkeypatch.setenv("WEAK", "123")
    with pytest.raises(CommandError, match="too weak"):
        _run("--password-from-env", "WEAK")
    assert not User.objects.exists()
