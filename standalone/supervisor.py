"""Child processes, each in its own session, logged to files, restarted with back-off when they crash,
stopped in reverse order."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    last: bool = False
    optional: bool = False  # its exit is reported, but Tandem keeps running
    reported: bool = False
    log_offset: int = 0  # logs are appended across runs: this run's output starts here
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] | None = None
    restarts: int = 0  # crashes in a row (reset once the child has stayed up for STABLE_SECONDS)
    started_at: float = field(default_factory=time.monotonic)
    restart_at: float | None = None  # when a crashed child is due to be started again

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_text(self) -> str:
        """What this run of the child has logged so far."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self.log_offset)
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def log_contains(self, text: str) -> bool:
        return text in self.log_text()


# Back-off between restarts of a crashed child: 1 s, 2 s, 4 s ... at most MAX_BACKOFF_SECONDS; a child that
# stayed up STABLE_SECONDS starts again from 1 s.
FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 30.0
STABLE_SECONDS = 60.0


def backoff_seconds(restarts: int) -> float:
    """Wait before restart number ``restarts`` (1 = the first restart after a crash)."""
    return float(min(MAX_BACKOFF_SECONDS, FIRST_BACKOFF_SECONDS * 2 ** max(restarts - 1, 0)))


@dataclass
class Supervisor:
    log_dir: Path
    env: dict[str, str]
    cwd: Path
    children: list[Child] = field(default_factory=list)
    stopping: bool = False  # set by stop_all: nothing is restarted any more

    def spawn(
        self,
        name: str,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        last: bool = False,
        optional: bool = False,
    ) -> Child:
        log_path = self.log_dir / f"{name}.log"
        proc, offset = self._popen(argv, env, log_path)
        child = Child(
            name=name,
            proc=proc,
            log_path=log_path,
            last=last,
            optional=optional,
            log_offset=offset,
            argv=list(argv),
            env=env,
        )
        self.children.append(child)
        return child

    def _popen(
        self, argv: list[str], env: dict[str, str] | None, log_path: Path
    ) -> tuple[subprocess.Popen[bytes], int]:
        with open(log_path, "ab") as log:
            offset = log.tell()
            proc = subprocess.Popen(
                argv,
                cwd=self.cwd,
                env=env or self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches only the supervisor, which stops children in order
            )
        return proc, offset

    def restart_crashed(self, *, say: Callable[[str], None] = print, now: float | None = None) -> list[Child]:
        """Schedule a restart for each child that exited, start those that are due; returns the restarted.

        A child that crashes again soon waits twice as long as the last time (``backoff_seconds``), so a
        child that cannot start does not spin; every exit and restart is said with the log to read."""
        now = time.monotonic() if now is None else now
        restarted: list[Child] = []
        for child in list(self.children):
            if self.stopping:
                return restarted
            if child.alive():
                if child.restarts and now - child.started_at >= STABLE_SECONDS:
                    child.restarts = 0
                continue
            if child.restart_at is None:
                child.restarts += 1
                delay = backoff_seconds(child.restarts)
                child.restart_at = now + delay
                say(
                    f"tandem: {child.name} (pid {child.pid}) exited with {child.proc.returncode}; restarting "
                    f"in {delay:.0f} s (restart {child.restarts}). Its log, {child.log_path}:\n"
                    f"{child.log_tail(5)}"
                )
            elif now >= child.restart_at:
                previous = child.pid
                child.proc, child.log_offset = self._popen(child.argv, child.env, child.log_path)
                child.started_at, child.restart_at, child.reported = now, None, False
                say(f"tandem: {child.name} restarted (pid {child.pid}, was {previous})")
                restarted.append(child)
        return restarted

    def names(self) -> list[str]:
        return [child.name for child in self.children]

    def first_dead(self) -> Child | None:
        """The first essential child that exited (Tandem cannot go on without it)."""
        return next((child for child in self.children if not child.optional and not child.alive()), None)

    def newly_dead_optional(self) -> list[Child]:
        """Optional children that exited since the last call (each reported once)."""
        dead = [c for c in self.children if c.optional and not c.reported and not c.alive()]
        for child in dead:
            child.reported = True
        return dead

    def stop_all(self, *, grace: float = 6.0, say: Callable[[str], None] = print) -> None:
        """Stop every child: SIGTERM to each process group newest first (all at once, so their
        shutdowns overlap), wait for each; then the children marked `last` (the broker their
        clients need while they shut down) the same way."""
        self.stopping = True
        later = [child for child in self.children if child.last]
        first = [child for child in self.children if not child.last]
        for batch in (first, later):
            begin = time.monotonic()
            for child in reversed(batch):
                if child.alive():
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(child.pid, signal.SIGTERM)
            for child in reversed(batch):
                remaining = max(0.5, grace - (time.monotonic() - begin))
                try:
                    child.proc.wait(timeout=remaining)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(child.pid, signal.SIGKILL)
                    child.proc.wait(timeout=5)
                    say(f"tandem: {child.name} did not stop in {grace:.0f} s; killed")
                # Anything the child left in its session goes too.
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(child.pid, signal.SIGKILL)
                say(f"tandem: stopped {child.name} ({time.monotonic() - begin:.1f} s)")
        self.children.clear()


def supervise_in_background(
    supervisor: Supervisor,
    stop: threading.Event,
    *,
    say: Callable[[str], None] = print,
    interval: float = 0.5,
) -> threading.Thread:
    """Restart crashed children (with back-off) until ``stop`` is set or the supervisor stops them."""

    def loop() -> None:
        while not stop.wait(interval) and not supervisor.stopping:
            supervisor.restart_crashed(say=say)

    thread = threading.Thread(target=loop, name="tandem-supervisor", daemon=True)
    thread.start()
    return thread


def wait_for(
    check: Callable[[], bool],
    *,
    timeout: float,
    interval: float = 0.1,
    child: Child | None = None,
    stop: threading.Event | None = None,
) -> bool:
    """Poll `check` until it holds; False on timeout, when `child` exits, or when `stop` is set."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (child is not None and not child.alive()) or (stop is not None and stop.is_set()):
            return False
        try:
            if check():
                return True
        except OSError:
            pass
        time.sleep(interval)
    return False
