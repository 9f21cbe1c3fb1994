"""`Authorization: Bearer <key>` for the REST API, beside browser sessions.

The token check and the limits are :mod:`keys.hotpath` (shared with the gateway); this module only
takes the token out of its header, turns refusals into API errors with a hint for the common
mistakes, and records failures.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from controlplane.client_ip import client_ip
from keys import hotpath, limits, tokens
from keys.records import KeyRecord

REALM = 'Bearer realm="tandem"'


class KeyAuthFailed(exceptions.AuthenticationFailed):
    def __init__(self, message: str, code: str) -> None:
        super().__init__(detail=message, code=code)


class KeyForbidden(exceptions.PermissionDenied):
    def __init__(self, message: str, code: str) -> None:
        super().__init__(detail=message, code=code)


class KeyThrottled(exceptions.Throttled):
    """A 429; `limit` is the machine-readable part (`error.limit` in the body, see keys.limits)."""

    def __init__(
        self, message: str, code: str, wait: int | None, limit: dict[str, object] | None = None
    ) -> None:
        super().__init__(wait=wait, detail=message, code=code)
        self.detail = exceptions.ErrorDetail(message, code=code)
        self.limit = limit


class KeyUnavailable(exceptions.APIException):
    status_code = 503

    def __init__(self, message: str, code: str) -> None:
        super().__init__(detail=message, code=code)


def bearer_token(header: str) -> str | None:
    """The token in an Authorization header; None when the header is not meant for us."""
    scheme, _, rest = header.partition(" ")
    if scheme.startswith(tokens.PREFIX) or header.strip().startswith(tokens.PREFIX):
        raise KeyAuthFailed(
            "The Authorization header has the key but not the word Bearer; "
            "send `Authorization: Bearer tdm_...`.",
            "bearer_missing",
        )
    if scheme.lower() != "bearer":
        if tokens.PREFIX in header:
            raise KeyAuthFailed(
                f"Tandem keys use the Bearer scheme, not {scheme[:20]!r}; "
                "send `Authorization: Bearer tdm_...`.",
                "wrong_scheme",
            )
        return None
    if not rest:
        raise KeyAuthFailed("The Authorization header says Bearer but carries no key.", "token_missing")
    return rest


def refusal_to_api_error(error: hotpath.KeyRefused) -> exceptions.APIException:
    if error.status == 429:
        return KeyThrottled(error.message, error.code, error.retry_after, error.detail or None)
    if error.status == 403:
        return KeyForbidden(error.message, error.code)
    if error.status == 503:
        return KeyUnavailable(error.message, error.code)
    return KeyAuthFailed(error.message, error.code)


class ApiKeyAuthentication(BaseAuthentication):
    kind = "management"

    def authenticate(self, request: Request) -> tuple[Any, KeyRecord] | None:
        header = request.META.get("HTTP_AUTHORIZATION")
        if not header:
            return None
        source_ip = client_ip(request)
        try:
            raw = bearer_token(header)
        except KeyAuthFailed as error:
            self._record_failure(request, str(error.get_codes()), source_ip, "")
            raise
        if raw is None:
            return None
        from django.conf import settings

        from keys.accounting import auth_failures_recent

        # A key this process already holds skips the check (attackers' random tokens are never cached).
        cached, _ = (
            hotpath.cache.get(tokens.digest(raw, hotpath.pepper())) if raw.isascii() else (False, None)
        )
        failures = auth_failures_recent(source_ip=source_ip) if not cached else 0
        if failures >= settings.API_KEY_FAILURE_LIMIT:
            resets_at = limits.reset_time("failed_authentications_per_minute", limits.now_utc())
            details = limits.limit_details(
                "failed_authentications_per_minute",
                value=settings.API_KEY_FAILURE_LIMIT,
                used=failures,
                resets_at=resets_at,
            )
            raise KeyThrottled(
                "Too many failed key authentications from this address; wait until "
                f"{details['resets_at']} and check the key.",
                "too_many_failures",
                int(str(details["retry_after"])),
                details,
            )
        try:
            grant = hotpath.authenticate(raw, kind=self.kind, source_ip=source_ip)
        except hotpath.KeyRefused as error:
            if error.status in (401, 403):
                prefix = (
                    raw.strip()[: tokens.DISPLAY_PREFIX_LENGTH]
                    if raw.strip().startswith(tokens.PREFIX)
                    else ""
                )
                self._record_failure(
                    request, error.code, source_ip, prefix, error.record.key_id if error.record else None
                )
            raise refusal_to_api_error(error) from None
        except Exception as error:  # Redis down or timing out: fail fast, name it
            if type(error).__module__.startswith("redis"):
                raise KeyUnavailable(
                    "API keys cannot be checked: Redis is not answering. "
                    "Retry shortly; browser sessions still work.",
                    "redis_unavailable",
                ) from None
            raise
        user = get_user_model().objects.filter(pk=grant.record.owner_id, is_active=True).first()
        if user is None:
            grant.settle()
            raise KeyAuthFailed(
                "This key's owner account is disabled; the key works no more.", "owner_inactive"
            )
        request._request._tandem_grant = grant  # type: ignore[attr-defined]
        if grant.crossed:
            from keys.tasks import key_budget_alert

            for crossed in grant.crossed:
                key_budget_alert.delay(grant.record.key_id, crossed)
        return user, grant.record

    def authenticate_header(self, request: Request) -> str:
        return REALM

    @staticmethod
    def _record_failure(
        request: Request, code: str, source_ip: str | None, prefix: str, key_id: str | None = None
    ) -> None:
        from keys.accounting import key_auth_failure_record

        try:
            key_auth_failure_record(
                code=code, source_ip=source_ip, path=request.path, display_prefix=prefix, key_id=key_id
            )
        except Exception:
            import logging

            logging.getLogger(__name__).exception("could not record a failed key authentication")
