"""Bad configuration stops every entry point with one line naming the variable."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.support import ROOT, VENV_BIN

GOOD = {
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/tandem",
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    "SECRET_KEY": "test-secret-key-not-for-production-0123456789abcdef",
    "FIELD_ENCRYPTION_KEYS": "qx7dD0H3ZxKdbMgFq3aXNd7R5lOqdRkk2m8Wq1fW0cM=",
    "TANDEM_HTTPS": "false",
}

ENTRY_POINTS = {
    "manage.py": [str(VENV_BIN / "python"), "manage.py", "check"],
    "uvicorn": [
        str(VENV_BIN / "uvicorn"),
        "controlplane.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
    ],
    "celery worker": [str(VENV_BIN / "celery"), "-A", "controlplane", "worker", "-P", "solo"],
    "celery beat": [str(VENV_BIN / "celery"), "-A", "controlplane", "beat"],
}

BAD = {
    "missing SECRET_KEY": ({"SECRET_KEY": None}, "SECRET_KEY is not set"),
    "malformed REDIS_URL": ({"REDIS_URL": "localhost:6379"}, "REDIS_URL has scheme"),
    "malformed DATABASE_URL": ({"DATABASE_URL": "mysql://db/tandem"}, "DATABASE_URL has scheme 'mysql'"),
    "bad encryption key": ({"FIELD_ENCRYPTION_KEYS": "not-a-key"}, "FIELD_ENCRYPTION_KEYS entry 1"),
    "bad boolean": ({"DEBUG": "maybe"}, "DEBUG='maybe' is not a boolean"),
    "bad proxy": ({"TRUSTED_PROXIES": "10.0.0.0/99"}, "TRUSTED_PROXIES entry '10.0.0.0/99'"),
}


def _env(changes: dict[str, str | None]) -> dict[str, str]:
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **GOOD}
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=list(ENTRY_POINTS))
@pytest.mark.parametrize("case", ["missing SECRET_KEY", "malformed REDIS_URL"])
def test_each_entry_point_stops_with_one_line_naming_the_variable(entry, case):
    changes, expected = BAD[case]
    result = subprocess.run(
        ENTRY_POINTS[entry], cwd=ROOT, env=_env(changes), capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tandem: configuration error: ")
    assert expected in lines[0]


@pytest.mark.parametrize("case", [c for c in BAD if c not in ("missing SECRET_KEY", "malformed REDIS_URL")])
def test_manage_py_names_each_malformed_variable(case):
    changes, expected = BAD[case]
    result = subprocess.run(
        ENTRY_POINTS["manage.py"], cwd=ROOT, env=_env(changes), capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert expected in result.stderr


def test_production_settings_pass_check_deploy_without_warnings():
    env = _env(
        {
            "TANDEM_HTTPS": "true",
            "DEBUG": "false",
            "SECRET_KEY": "k" * 20 + "Zq9!x@Vb7#Lm2$Np5%Rt8^Yw3&Hd6*Jf4",
        }
    )
    env["ALLOWED_HOSTS"] = "tandem.example.com"
    result = subprocess.run(
        [str(VENV_BIN / "python"), "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout
