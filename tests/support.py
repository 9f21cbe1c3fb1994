"""Helpers for tests that run Tandem's real processes (uvicorn, Celery) as subprocesses."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO
from urllib.parse import quote

from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def closed_port() -> int:
    """A loopback port nothing listens on (bound and released)."""
    return free_port()


def test_database_url() -> str:
    """The URL of the database pytest-django created, so a subprocess shares the test's data."""
    db = settings.DATABASES["default"]
    user = quote(str(db.get("USER") or ""))
    password = quote(str(db.get("PASSWORD") or ""))
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    return f"postgres://{auth}{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


def subprocess_env(**overrides: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {"DATABASE_URL": test_database_url(), "REDIS_URL": settings.REDIS_URL, "PYTHONUNBUFFERED": "1"}
    )
    env.update(overrides)
    return env


def http_get(url: str, timeout: float = 5) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback only
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def wait_until(
    check: Callable[[], bool], timeout: float, what: str, proc: subprocess.Popen[bytes] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            output = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            raise AssertionError(f"{what}: process exited with {proc.returncode}:\n{output[-3000:]}")
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{what} not ready within {timeout} s")


def stop(proc: subprocess.Popen[bytes], timeout: float = 10) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


@contextmanager
def uvicorn_server(
    env: dict[str, str],
    *,
    ready_path: str = "/healthz",
    log_level: str = "warning",
    output: IO[bytes] | int = subprocess.PIPE,
) -> Iterator[str]:
    """Run the ASGI app in uvicorn on a free loopback port; yields the base URL.

    ``output`` (a file) receives everything the process writes, for tests that read its logs."""
    port = free_port()
    proc = subprocess.Popen(
        [
            str(VENV_BIN / "uvicorn"),
            "controlplane.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            log_level,
            "--timeout-graceful-shutdown",
            "2",
        ],
        cwd=ROOT,
        env=env,
        stdout=output,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: http_get(base + ready_path, timeout=1)[0] > 0, 30, "uvicorn", proc)
        yield base
    finally:
        stop(proc)


@contextmanager
def celery_worker(
    env: dict[str, str],
    queues: str = "default,deploy,inventory,telemetry",
    *,
    log_level: str = "INFO",
    output: IO[bytes] | int = subprocess.PIPE,
) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        [
            str(VENV_BIN / "celery"),
            "-A",
            "controlplane",
            "worker",
            "-P",
            "solo",
            "-Q",
            queues,
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            log_level,
        ],
        cwd=ROOT,
        env=env,
        stdout=output,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        stop(proc)


@contextmanager
def celery_beat(
    env: dict[str, str], schedule: Path, *, log_level: str = "INFO", output: IO[bytes] | int = subprocess.PIPE
) -> Iterator[subprocess.Popen[bytes]]:
    """Celery beat with its schedule file at ``schedule`` (a temporary path)."""
    proc = subprocess.Popen(
        [
            str(VENV_BIN / "celery"),
            "-A",
            "controlplane",
            "beat",
            "--schedule",
            str(schedule),
            "--loglevel",
            log_level,
        ],
        cwd=ROOT,
        env=env,
        stdout=output,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        stop(proc)
