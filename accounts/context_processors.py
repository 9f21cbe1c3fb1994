from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from accounts.permissions import user_has_role
from accounts.roles import Role


def roles(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    return {
        "can_operate": user_has_role(user, Role.OPERATOR),
        "can_admin": user_has_role(user, Role.ADMIN),
    }
