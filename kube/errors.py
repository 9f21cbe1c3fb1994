"""Domain errors for everything that goes wrong talking to a cluster, with messages a person can act on."""

from __future__ import annotations

import json
from typing import Any


class KubeError(Exception):
    """A Kubernetes call failed. ``message`` is readable; ``status`` is the HTTP status (None: no answer)."""

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason

    def __str__(self) -> str:
        return self.message


class KubeUnreachable(KubeError):
    """No usable answer: connection refused, DNS, timeout, TLS failure, or 5xx after every retry."""


class KubeUnauthorized(KubeError):
    """HTTP 401: the credentials are wrong or expired."""


class KubeForbidden(KubeError):
    """HTTP 403: authenticated, but RBAC does not allow the verb on the resource."""


class KubeNotFound(KubeError):
    """HTTP 404 on an object (not on a whole API group: that is KubeNotInstalled)."""


class KubeConflict(KubeError):
    """HTTP 409: a field owned by another manager, an object that already exists, or a stale update."""


class KubeInvalid(KubeError):
    """HTTP 422 (or 400): the server rejected the object; ``causes`` lists (field, message)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = 422,
        reason: str = "Invalid",
        causes: list[tuple[str, str]] | None = None,
    ) -> None:
        super().__init__(message, status=status, reason=reason)
        self.causes: list[tuple[str, str]] = list(causes or [])


class KubeNotInstalled(KubeError):
    """The cluster does not serve the API group/kind (for example the Kthena CRDs are not installed)."""


def parse_status_body(body: bytes | str | None) -> dict[str, Any]:
    """Decode a `Status` answer; anything unparseable becomes ``{"message": <text>}``."""
    if not body:
        return {}
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        data = json.loads(text)
    except ValueError:
        return {"message": text.strip()[:500]}
    return data if isinstance(data, dict) else {"message": text.strip()[:500]}


def _causes(status_body: dict[str, Any]) -> list[tuple[str, str]]:
    details = status_body.get("details") or {}
    causes = []
    for cause in details.get("causes") or []:
        if isinstance(cause, dict):
            causes.append((str(cause.get("field", "")), str(cause.get("message", cause.get("reason", "")))))
    return causes


def error_from_response(
    *,
    status: int,
    body: bytes | str | None,
    cluster: str,
    action: str,
    server: str = "",
) -> KubeError:
    """Map an HTTP error answer to a KubeError subclass with a message naming the cluster and the action.

    ``action`` reads as a verb phrase: "apply ModelServing demo/ds-pd", "list pods in demo".
    """
    data = parse_status_body(body)
    server_message = str(data.get("message") or "").strip()
    reason = str(data.get("reason") or "")
    who = f"cluster `{cluster}`" if cluster else "the cluster"
    if status == 401:
        return KubeUnauthorized(
            f"{who} rejected the credentials (HTTP 401) on {action}; the token or client certificate is "
            "wrong or expired — register fresh credentials",
            status=status,
            reason=reason or "Unauthorized",
        )
    if status == 403:
        detail = f": {server_message}" if server_message else ""
        return KubeForbidden(
            f"{who} forbids {action} (HTTP 403){detail}; grant the role bound to Tandem's service account "
            "this permission",
            status=status,
            reason=reason or "Forbidden",
        )
    if status == 404:
        detail = f": {server_message}" if server_message else ""
        return KubeNotFound(
            f"{who} has no such object for {action} (HTTP 404){detail}",
            status=status,
            reason=reason or "NotFound",
        )
    if status == 409:
        return KubeConflict(
            f"{who} refused {action} with a conflict (HTTP 409): {server_message or reason or 'conflict'}",
            status=status,
            reason=reason or "Conflict",
        )
    if status in (400, 422):
        causes = _causes(data)
        detail = "; ".join(f"{field}: {msg}" if field else msg for field, msg in causes) or server_message
        return KubeInvalid(
            f"{who} refused {action}: {detail or 'invalid request'} (HTTP {status})",
            status=status,
            reason=reason or "Invalid",
            causes=causes,
        )
    if status == 429 or status >= 500:
        return KubeUnreachable(
            f"{who} kept failing {action} (HTTP {status}"
            f"{': ' + server_message if server_message else ''}); "
            f"the API server at {server or 'its address'} is overloaded or unwell",
            status=status,
            reason=reason or "ServerError",
        )
    return KubeError(
        f"{who} refused {action} (HTTP {status}): {server_message or reason or 'no details'}",
        status=status,
        reason=reason,
    )


def describe_connection_error(exc: BaseException, server: str) -> str:
    """Turn a low-level connection exception into words: "cannot reach https://...: connection refused"."""
    text = f"{type(exc).__name__}: {exc}"
    low = text.lower()
    if "certificate verify failed" in low or "certificate_verify_failed" in low:
        what = "its TLS certificate is not signed by the CA bundle given (TLS verification is always on)"
        if "hostname" in low or "ip address mismatch" in low:
            what = "its TLS certificate does not name this address (hostname mismatch)"
        return f"cannot trust {server}: {what}; upload the cluster's CA bundle"
    if (
        "wrong version number" in low
        or "record layer failure" in low
        or ("http request" in low and "https" in low)
    ):
        return f"cannot reach {server}: it does not speak TLS on that port (is it http://?)"
    if "sslerror" in low or ("ssl" in low and "error" in low):
        return f"cannot reach {server}: TLS handshake failed ({_last_line(exc)})"
    if "connection refused" in low or "errno 111" in low:
        return f"cannot reach {server}: connection refused"
    if (
        "name or service not known" in low
        or "nodename nor servname" in low
        or "temporary failure in name" in low
    ):
        return f"cannot reach {server}: the host name does not resolve"
    if "timed out" in low or "timeout" in low:
        return f"cannot reach {server}: no answer before the timeout"
    if "no route to host" in low or "network is unreachable" in low:
        return f"cannot reach {server}: no route to host"
    if "connection reset" in low or "remote end closed" in low or "remotedisconnected" in low:
        return f"cannot reach {server}: the connection was closed without an answer"
    return f"cannot reach {server}: {_last_line(exc)}"


def _last_line(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    text = str(reason or exc).strip().splitlines()
    return (text[-1] if text else type(exc).__name__)[:300]
