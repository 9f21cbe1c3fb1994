"""Typed environment readers that fail loudly with one line naming the variable."""

from __future__ import annotations

import os
from urllib.parse import urlparse

from django.core.exceptions import ImproperlyConfigured


class ConfigError(ImproperlyConfigured):
    """A missing or malformed environment variable; the message is one line."""


_MISSING = object()


def env_str(name: str, default: object = _MISSING, *, hint: str = "a non-empty string") -> str:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        if default is _MISSING:
            raise ConfigError(f"{name} is not set; it should be {hint}")
        return str(default)
    return raw.strip()


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"{name}={raw!r} is not a boolean; use true or false")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer; use a whole number such as {default}") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name}={value} is too small; it must be at least {minimum}")
    return value


def env_seconds(name: str, default: float, *, minimum: float = 0.05) -> float:
    """A duration in seconds (decimals allowed), at least ``minimum``."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number of seconds; use e.g. {default}") from None
    if not value >= minimum or value == float("inf"):
        raise ConfigError(f"{name}={raw!r} is out of range; it must be at least {minimum} seconds")
    return value


def env_list(
    name: str, default: list[str] | None = None, *, hint: str = "a comma-separated list"
) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        if default is None:
            raise ConfigError(f"{name} is not set; it should be {hint}")
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env_str(name, default).lower()
    if value not in choices:
        raise ConfigError(f"{name}={value!r} is not one of {', '.join(choices)}")
    return value


def env_url(name: str, schemes: tuple[str, ...], example: str) -> str:
    value = env_str(name, hint=f"a URL such as {example}")
    parsed = urlparse(value)
    if parsed.scheme not in schemes:
        raise ConfigError(
            f"{name} has scheme {parsed.scheme or '(none)'!r}; it should look like {example} "
            f"(schemes: {', '.join(schemes)})"
        )
    if parsed.scheme != "sqlite" and not parsed.hostname and not parsed.path:
        raise ConfigError(f"{name} names no host; it should look like {example}")
    return value


def database_from_url(url: str, *, conn_max_age: int) -> dict[str, object]:
    """Turn DATABASE_URL into a Django DATABASES entry (PostgreSQL via psycopg 3, or SQLite)."""
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        path = parsed.path
        if url.startswith("sqlite:////"):
            path = "/" + path.lstrip("/")
        elif path.startswith("/"):
            path = path[1:]
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": path or "tandem.sqlite3",
            # Several processes share the file in standalone mode: WAL plus a busy timeout.
            "OPTIONS": {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
            },
        }
    from urllib.parse import parse_qs, unquote

    query = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parsed.path.lstrip("/")) or "tandem",
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": parsed.hostname or "",
        "PORT": str(parsed.port or ""),
        "CONN_MAX_AGE": conn_max_age,
        "CONN_HEALTH_CHECKS": True,
        "OPTIONS": query,
    }
