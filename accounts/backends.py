"""Password authentication that honours the login lockout wherever a password is checked."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from accounts import lockout
from accounts.models import User
from controlplane.client_ip import client_ip


class LockoutModelBackend(ModelBackend):
    """ModelBackend that refuses (PermissionDenied stops every backend) while the pair is locked."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> User | None:
        name = username or kwargs.get(get_user_model().USERNAME_FIELD)
        if name and lockout.seconds_remaining(str(name), client_ip(request)):
            raise PermissionDenied("locked out")
        user = super().authenticate(request, username=username, password=password, **kwargs)
        return user if isinstance(user, User) else None
