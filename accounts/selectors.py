from __future__ import annotations

from django.db.models import QuerySet

from accounts import lockout
from accounts.models import User
from accounts.roles import Role


def user_list() -> QuerySet[User]:
    return User.objects.order_by("username")


def active_admin_count() -> int:
    return User.objects.filter(is_active=True, role=Role.ADMIN).count()


def login_lockout_remaining(*, username: str, source_ip: str | None) -> int:
    """Seconds until this username may try again from this address (0: not locked)."""
    return lockout.seconds_remaining(username, source_ip)
