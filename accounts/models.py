from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import models

from accounts.roles import Role, role_allows


class User(AbstractUser):
    """A person who signs in. ``role`` alone decides what they may do in Tandem (pages, API,
    websockets); ``is_superuser``/``is_staff`` only open Django's /admin/ site, and lowering the role
    below admin clears them (``accounts.services.user_update``)."""

    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)

    def save(self, *args: Any, **kwargs: Any) -> None:
        # `manage.py createsuperuser` knows nothing of roles: a user created as a superuser is an admin,
        # so the role stays the one source of rights from the first save on.
        if self._state.adding and self.is_superuser and self.role == Role.VIEWER:
            self.role = Role.ADMIN
        super().save(*args, **kwargs)

    def has_role(self, needed: str) -> bool:
        if not self.is_active:
            return False
        return role_allows(self.role, needed)

    @property
    def is_operator(self) -> bool:
        return self.has_role(Role.OPERATOR)

    @property
    def is_admin_role(self) -> bool:
        return self.has_role(Role.ADMIN)
