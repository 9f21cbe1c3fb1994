"""Writes for accounts: users and roles (admin only), and the login/logout audit trail."""

from __future__ import annotations

import unicodedata
from typing import Any

from django.contrib.auth.password_validation import validate_password
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.db import transaction

from accounts import lockout
from accounts.models import User
from accounts.roles import Role
from accounts.selectors import active_admin_count
from audit.services import audit_record
from controlplane import broadcast
from controlplane.api.errors import Conflict, DomainError


def _check_password(password: str, user: User) -> None:
    try:
        validate_password(password, user)
    except ValidationError as error:
        raise DomainError(
            "The password is too weak.",
            code="weak_password",
            fields={"password": [f"{m} Choose a longer, less common password." for m in error.messages]},
        ) from None


def _check_username(username: str) -> str:
    """Django's username rule (letters, digits and @ . + - _), and nothing invisible: no spaces, no
    control or format characters (bidi overrides such as U+202E, zero-width joiners), so a name shows
    in lists and the audit log as what it is."""
    raw = (username or "").strip()
    name = User.normalize_username(raw)
    if not name:
        raise DomainError("A username is required.", fields={"username": ["Enter a username."]})
    if len(name) > 150:
        raise DomainError("The username is too long.", fields={"username": ["Use at most 150 characters."]})
    hidden = [ch for ch in raw + name if ch.isspace() or unicodedata.category(ch) in _HIDDEN_CATEGORIES]
    if hidden:
        names = ", ".join(sorted({f"U+{ord(ch):04X}" for ch in hidden}))
        raise DomainError(
            "The username contains spaces or invisible characters.",
            fields={"username": [f"Remove {names}; use letters, digits and @ . + - _ only."]},
        )
    try:
        UnicodeUsernameValidator()(name)
    except ValidationError:
        raise DomainError(
            "The username has characters Tandem does not accept.",
            fields={"username": ["Use letters, digits and @ . + - _ only."]},
        ) from None
    return name


# Control, format (bidi overrides, zero-width), unassigned, private-use, separators and combining marks.
_HIDDEN_CATEGORIES = {"Cc", "Cf", "Cn", "Co", "Cs", "Zs", "Zl", "Zp", "Mn", "Me"}


def _check_role(role: str) -> None:
    if role not in Role.values:
        raise DomainError(
            f"Unknown role {role!r}.",
            code="invalid",
            fields={"role": [f"Use one of: {', '.join(Role.values)}."]},
        )


def _is_active_admin(user: User) -> bool:
    return user.is_active and user.role == Role.ADMIN


@transaction.atomic
def user_create(
    *,
    actor: Any,
    username: str,
    password: str,
    role: str = Role.VIEWER,
    email: str = "",
    source_ip: str | None = None,
) -> User:
    username = _check_username(username)
    if User.objects.filter(username__iexact=username).exists():
        raise Conflict(
            f"A user named {username!r} already exists.",
            code="duplicate",
            fields={"username": ["Choose another username, or edit the existing user."]},
        )
    _check_role(role)
    user = User(username=username, email=email.strip(), role=role)
    _check_password(password, user)
    user.set_password(password)
    user.save()
    audit_record(action="user.create", actor=actor, target=user, source_ip=source_ip, detail={"role": role})
    return user


@transaction.atomic
def user_update(
    *,
    actor: Any,
    user: User,
    role: str | None = None,
    is_active: bool | None = None,
    email: str | None = None,
    password: str | None = None,
    source_ip: str | None = None,
) -> User:
    """Change role, active flag, email and/or password together: all of them, or (on any error) none."""
    user = User.objects.select_for_update().get(pk=user.pk)
    if password is not None:
        _check_password(password, user)
    changes: dict[str, list[object]] = {}
    if role is not None and role != user.role:
        _check_role(role)
        changes["role"] = [user.role, role]
        user.role = role
        if role != Role.ADMIN and (user.is_superuser or user.is_staff):
            # The role is the one source of rights: a demoted admin loses Django's /admin/ site too.
            changes["is_superuser"] = [user.is_superuser, False]
            user.is_superuser = False
            user.is_staff = False
    if is_active is not None and is_active != user.is_active:
        changes["is_active"] = [user.is_active, is_active]
        user.is_active = is_active
        if not is_active:
            broadcast.sessions_end_on_commit(user.pk)
    if email is not None and email.strip() != user.email:
        changes["email"] = [user.email, email.strip()]
        user.email = email.strip()
    if changes:
        was_admin = _is_active_admin(User.objects.get(pk=user.pk))
        if was_admin and not _is_active_admin(user) and active_admin_count() <= 1:
            raise Conflict(
                "This is the last active admin; Tandem needs at least one.",
                code="last_admin",
                fields={"role": ["Make another user an admin first."]},
            )
        user.save()
        audit_record(action="user.update", actor=actor, target=user, source_ip=source_ip, detail=changes)
    if password is not None:
        user = user_set_password(actor=actor, user=user, password=password, source_ip=source_ip)
    return user


@transaction.atomic
def user_set_password(*, actor: Any, user: User, password: str, source_ip: str | None = None) -> User:
    _check_password(password, user)
    user.set_password(password)
    user.save(update_fields=["password"])
    audit_record(action="user.password_set", actor=actor, target=user, source_ip=source_ip)
    return user


@transaction.atomic
def user_delete(*, actor: Any, user: User, source_ip: str | None = None) -> None:
    if actor is not None and getattr(actor, "pk", None) == user.pk:
        raise Conflict(
            "You cannot delete your own account.",
            code="self_delete",
            fields={"id": ["Ask another admin to delete it, or deactivate it instead."]},
        )
    if _is_active_admin(user) and active_admin_count() <= 1:
        raise Conflict(
            "This is the last active admin; Tandem needs at least one.",
            code="last_admin",
            fields={"id": ["Make another user an admin first."]},
        )
    audit_record(
        action="user.delete",
        actor=actor,
        target=user,
        source_ip=source_ip,
        detail={"username": user.username, "role": user.role},
    )
    broadcast.sessions_end_on_commit(user.pk)
    user.delete()


# --- login / logout trail ------------------------------------------------------------------------


def login_success_record(*, user: User, source_ip: str | None) -> None:
    lockout.clear(user.get_username(), source_ip)
    audit_record(action="auth.login", actor=user, target=user, source_ip=source_ip)


def logout_record(*, user: User | None, source_ip: str | None, session_key: str | None = None) -> None:
    """Audit a logout and close the websockets of that session (all of the user's when it is unknown)."""
    if user is None or not user.is_authenticated:
        return
    audit_record(action="auth.logout", actor=user, target=user, source_ip=source_ip)
    broadcast.sessions_end_on_commit(user.pk, session_key)


def login_failure_record(*, username: str, source_ip: str | None) -> int:
    """Count a failed login and audit it; returns the seconds of lockout now in force (0 if none)."""
    username = (username or "").strip()[:150]
    remaining = lockout.seconds_remaining(username, source_ip)
    if remaining:
        audit_record(
            action="auth.login_failed",
            actor_label=username or "(blank)",
            source_ip=source_ip,
            detail={"username": username, "reason": "locked out"},
        )
        return remaining
    failures, locked = lockout.count_failure(username, source_ip)
    audit_record(
        action="auth.login_failed",
        actor_label=username or "(blank)",
        source_ip=source_ip,
        detail={"username": username, "reason": "bad credentials", "failures": failures},
    )
    if locked:
        remaining = lockout.seconds_remaining(username, source_ip)
        audit_record(
            action="auth.lockout",
            actor_label=username or "(blank)",
            source_ip=source_ip,
            detail={"username": username, "seconds": remaining, "failures": failures},
        )
    return remaining


def createadmin_ensure(
    *, username: str, password: str | None, reset_password: bool, email: str = ""
) -> tuple[User, str, str | None]:
    """Make sure an admin named `username` exists. Returns (user, outcome, generated password).

    outcome is "created", "password reset" or "unchanged"; an existing user is left alone unless
    `reset_password`. Used by `manage.py createadmin` and the standalone runner.
    """
    import secrets

    generated = None
    existing = User.objects.filter(username=username).first()
    if existing is not None and not reset_password:
        return existing, "unchanged", None
    if not password:
        generated = password = secrets.token_urlsafe(15)
    if existing is None:
        username = _check_username(username)
        with transaction.atomic():
            user = User(username=username, email=email, role=Role.ADMIN, is_staff=True, is_superuser=True)
            _check_password(password, user)
            user.set_password(password)
            user.save()
            audit_record(action="user.create", actor=None, target=user, detail={"role": Role.ADMIN})
        return user, "created", generated
    with transaction.atomic():
        _check_password(password, existing)
        existing.set_password(password)
        existing.role = Role.ADMIN
        existing.is_active = True
        existing.save()
        audit_record(action="user.password_set", actor=None, target=existing, detail={"via": "createadmin"})
    return existing, "password reset", generated
