"""Role checks shared by the API (DRF permission) and the pages (view decorator)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any, TypeVar

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from rest_framework.permissions import SAFE_METHODS, BasePermission

from accounts.roles import Role

if TYPE_CHECKING:
    from rest_framework.request import Request
    from rest_framework.views import APIView

ViewFunc = TypeVar("ViewFunc", bound=Callable[..., HttpResponse])


def user_has_role(user: Any, needed: str) -> bool:
    return bool(user and user.is_authenticated and user.has_role(needed))


class RolePermission(BasePermission):
    """Reads need a viewer; writes need the role the view names.

    A view sets ``write_role`` (default admin) and may refine per action with
    ``action_roles = {"deploy": Role.OPERATOR}``.
    """

    message = "Your role does not allow this action."

    def needed_role(self, request: Request, view: APIView) -> str:
        action = getattr(view, "action", None)
        action_roles: dict[str, str] = getattr(view, "action_roles", {})
        if action and action in action_roles:
            return action_roles[action]
        if request.method in SAFE_METHODS:
            return Role.VIEWER
        return getattr(view, "write_role", Role.ADMIN)

    def has_permission(self, request: Request, view: APIView) -> bool:
        needed = self.needed_role(request, view)
        allowed = user_has_role(request.user, needed)
        if not allowed and request.user and request.user.is_authenticated:
            self.message = (
                f"This action needs the {needed} role; you are a {getattr(request.user, 'role', 'viewer')}."
            )
        return allowed


def role_required(needed: str) -> Callable[[ViewFunc], ViewFunc]:
    """Page decorator: log in first, then 403 unless the user holds the role."""

    def decorator(view: ViewFunc) -> ViewFunc:
        @login_required
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not user_has_role(request.user, needed):
                raise PermissionDenied(f"This page needs the {needed} role.")
            return view(request, *args, **kwargs)

        return wrapped  # type: ignore[return-value]

    return decorator
