"""Thin adapters from Django's auth signals to the accounts services."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.dispatch import receiver

from accounts import services
from controlplane.client_ip import client_ip


@receiver(user_logged_in, dispatch_uid="accounts.login")
def on_login(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    services.login_success_record(user=user, source_ip=client_ip(request))


@receiver(user_logged_out, dispatch_uid="accounts.logout")
def on_logout(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    session = getattr(request, "session", None)
    services.logout_record(
        user=user, source_ip=client_ip(request), session_key=getattr(session, "session_key", None)
    )


@receiver(user_login_failed, dispatch_uid="accounts.login_failed")
def on_login_failed(sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs: Any) -> None:
    services.login_failure_record(
        username=str(credentials.get("username") or ""), source_ip=client_ip(request)
    )
