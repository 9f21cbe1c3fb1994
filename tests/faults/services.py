"""Private Redis and PostgreSQL instances for fault tests: started on a free loopback port in a temporary
directory, stopped (SIGSTOP/SIGCONT, restarted, killed) by the test, and removed afterwards. The
machine's shared services are never touched."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis

from tests.support import free_port


@dataclass
class PrivateRedis:
    port: int
    directory: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed (apt-get install -y redis-server)"
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if redis.Redis(port=self.port, socket_timeout=0.5).ping():
                    return
            except redis.RedisError:
                time.sleep(0.05)
        raise AssertionError(f"private redis-server on port {self.port} did not start")

    def freeze(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.proc = None


@contextmanager
def private_redis() -> Iterator[PrivateRedis]:
    with tempfile.TemporaryDirectory(prefix="tandem-fault-redis-") as directory:
        server = PrivateRedis(port=free_port(), directory=Path(directory))
        server.start()
        try:
            yield server
        finally:
            server.stop()


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    assert found, f"{name} not found under /usr/lib/postgresql/*/bin (apt-get install -y postgresql)"
    return found[-1]


@dataclass
class PrivatePostgres:
    port: int
    directory: Path
    owner: tuple[int, int] | None = None  # (uid, gid) to run the server as (initdb refuses root)

    @property
    def data(self) -> Path:
        return self.directory / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str, check: bool = True) -> None:
        user, group = self.owner if self.owner is not None else (None, None)
        subprocess.run(args, check=check, capture_output=True, timeout=60, user=user, group=group, cwd="/tmp")

    def init(self) -> None:
        self._run(_pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.directory} -c fsync=off"
        log = str(self.directory / "postgres.log")  # the server's output must not hold pg_ctl's pipes open
        self._run(
            _pg_bin("pg_ctl"), "-D", str(self.data), "-l", log, "-o", options, "-w", "-t", "30", "start"
        )

    def stop(self) -> None:
        """A fast shutdown (committed data is kept); nothing happens when it is not running."""
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop", check=False)


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A throwaway PostgreSQL cluster (initdb in a temporary directory, trust auth, loopback only). As root
    it runs as the ``postgres`` system user, since initdb refuses root."""
    with tempfile.TemporaryDirectory(prefix="tandem-fault-pg-") as directory:
        owner = None
        if os.geteuid() == 0:
            import pwd

            user = pwd.getpwnam("postgres")
            owner = (user.pw_uid, user.pw_gid)
            os.chown(directory, *owner)
            os.chmod(directory, 0o700)
        server = PrivatePostgres(port=free_port(), directory=Path(directory), owner=owner)
        server.init()
        server.start()
        try:
            yield server
        finally:
            server.stop()
