"""The standalone state directory and its secrets file (created once, chmod 600)."""

from __future__ import annotations

import os
import secrets
import shlex
from pathlib import Path

from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parent.parent


def state_dir() -> Path:
    configured = os.environ.get("TANDEM_STATE_DIR", "").strip()
    path = Path(configured).expanduser().resolve() if configured else ROOT / "var"
    for sub in ("", "logs", "redis", "staticfiles"):
        (path / sub).mkdir(parents=True, exist_ok=True)
    return path


def read_env_file(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    if not path.exists():
        return values
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, _, raw = line.partition("=")
        parts = shlex.split(raw)
        values[name.strip()] = parts[0] if parts else ""
    return values


def write_env_file(path: Path, values: dict[str, str]) -> None:
    lines = ["# Tandem standalone secrets; generated on first run. Keep private (chmod 600)."]
    lines += [f"{name}={shlex.quote(value)}" for name, value in values.items()]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    os.chmod(path, 0o600)


def load_or_create_secrets(directory: Path, admin_password: str | None) -> tuple[dict[str, str], bool]:
    """SECRET_KEY, FIELD_ENCRYPTION_KEYS and the admin password, persisted in standalone.env.

    Returns (values, admin password changed): an explicit TANDEM_ADMIN_PASSWORD that differs from
    the stored one replaces it, and the caller resets the admin's password to match.
    """
    path = directory / "standalone.env"
    values = read_env_file(path)
    changed = False
    if not values.get("SECRET_KEY"):
        values["SECRET_KEY"] = secrets.token_urlsafe(50)
    if not values.get("FIELD_ENCRYPTION_KEYS"):
        values["FIELD_ENCRYPTION_KEYS"] = Fernet.generate_key().decode()
    if admin_password and admin_password != values.get("TANDEM_ADMIN_PASSWORD"):
        changed = "TANDEM_ADMIN_PASSWORD" in values
        values["TANDEM_ADMIN_PASSWORD"] = admin_password
    elif not values.get("TANDEM_ADMIN_PASSWORD"):
        values["TANDEM_ADMIN_PASSWORD"] = secrets.token_urlsafe(12)
    write_env_file(path, values)
    return values, changed
