"""Checks of what a key may be given, with errors that name the field and the fix (pure)."""

from __future__ import annotations

import ipaddress
import unicodedata
from datetime import datetime, timedelta
from typing import Any

from controlplane.api.errors import DomainError
from keys.purposes import PURPOSES, Kind, Purpose
from keys.scopes import ALL_SCOPES, scopes_for_kind

LIMIT_FIELDS = (
    "requests_per_minute",
    "tokens_per_minute",
    "max_concurrent",
    "requests_per_day",
    "requests_per_month",
    "tokens_per_day",
    "tokens_per_month",
)
MAX_LIMIT = 10**15
MAX_CIDRS = 32
MAX_MODELS = 100
MAX_GRACE_SECONDS = 30 * 86400


def invalid(field: str, message: str) -> DomainError:
    return DomainError(f"{field}: {message}", code="invalid", fields={field: [message]})


def clean_text(field: str, value: Any, *, max_length: int, required: bool) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise invalid(field, "must be a string")
    text = value.strip()
    if required and not text:
        raise invalid(field, "is required, e.g. ci-deploy or claude-code-alice")
    if len(text) > max_length:
        raise invalid(field, f"is longer than {max_length} characters; shorten it")
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in text):
        raise invalid(field, "contains control or invisible formatting characters; use plain text")
    return text


def clean_purpose(purpose: Any, label: Any) -> tuple[Purpose, str]:
    if not isinstance(purpose, str) or purpose not in PURPOSES:
        raise invalid("purpose", f"unknown purpose {purpose!r}; choose one of {', '.join(PURPOSES)}")
    text = clean_text("purpose_label", label, max_length=64, required=purpose == "custom")
    return PURPOSES[purpose], text if purpose == "custom" else ""


def clean_kind(kind: Any, purpose: Purpose) -> str:
    if kind in (None, ""):
        return purpose.kind
    if kind not in Kind.values:
        raise invalid("kind", f"unknown kind {kind!r}; use management or inference")
    return str(kind)


def clean_scopes(scopes: Any, *, kind: str, within: frozenset[str], within_why: str) -> list[str]:
    if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
        raise invalid("scopes", 'must be a list of scope names, e.g. ["deploy", "topologies:read"]')
    unknown = sorted(set(scopes) - ALL_SCOPES)
    if unknown:
        raise invalid(
            "scopes", f"unknown scope {unknown[0]!r}; known scopes: {', '.join(sorted(ALL_SCOPES))}"
        )
    wrong = sorted(set(scopes) - scopes_for_kind(kind))
    if wrong:
        hint = (
            "inference keys hold only `inference`"
            if kind == Kind.INFERENCE
            else ("management keys cannot call the gateway; create an inference key for that")
        )
        raise invalid("scopes", f"{wrong[0]} does not fit a {kind} key: {hint}")
    beyond = sorted(set(scopes) - within)
    if beyond:
        raise invalid("scopes", f"{', '.join(beyond)}: {within_why}")
    if not scopes:
        raise invalid("scopes", "give the key at least one scope")
    return sorted(set(scopes))


def clean_limit(field: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(field, "must be a whole number or null (no limit)")
    if value < 0 or value > MAX_LIMIT:
        raise invalid(field, f"must be between 0 and {MAX_LIMIT}, or null for no limit")
    return value


def clean_thresholds(value: Any) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in value):
        raise invalid("alert_thresholds", "must be a list of percentages, e.g. [80, 95]")
    if any(t < 1 or t > 100 for t in value) or len(value) > 5:
        raise invalid("alert_thresholds", "give up to 5 percentages between 1 and 100")
    return sorted(set(value))


def clean_cidrs(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid("allowed_cidrs", 'must be a list of networks, e.g. ["10.0.0.0/8", "192.0.2.7"]')
    if len(value) > MAX_CIDRS:
        raise invalid("allowed_cidrs", f"give at most {MAX_CIDRS} networks")
    networks = []
    for entry in value:
        try:
            networks.append(str(ipaddress.ip_network(entry.strip(), strict=False)))
        except ValueError:
            raise invalid(
                "allowed_cidrs", f"{entry[:60]!r} is not an address or network; use e.g. 10.0.0.0/8"
            ) from None
    return networks


def clean_models(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid("allowed_models", "must be a list of model or topology names; empty allows every model")
    if len(value) > MAX_MODELS:
        raise invalid("allowed_models", f"give at most {MAX_MODELS} names")
    return sorted({clean_text("allowed_models", v, max_length=200, required=True) for v in value})


def clean_expiry(value: Any, *, purpose: Purpose, now: datetime, created: datetime | None = None) -> datetime:
    """An expiry in the future and within the purpose's cap (counted from creation)."""
    start = created or now
    cap = start + timedelta(days=purpose.max_expiry_days)
    if value is None:
        return min(now + timedelta(days=purpose.expiry_days), cap)
    if not isinstance(value, datetime):
        raise invalid("expires_at", "must be a date and time, e.g. 2027-01-31T00:00:00Z")
    if value <= now:
        raise invalid("expires_at", "must be in the future")
    if value > cap:
        raise invalid(
            "expires_at",
            f"{purpose.label} keys live at most {purpose.max_expiry_days} days; "
            f"choose {cap.isoformat()} or earlier",
        )
    return value


def clean_grace(value: Any, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > MAX_GRACE_SECONDS:
        raise invalid("grace_seconds", f"must be whole seconds between 0 and {MAX_GRACE_SECONDS} (30 days)")
    return value
