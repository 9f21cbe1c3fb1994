"""Child processes, each in its own session, logged to files, stopped in reverse order."""

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


@dataclass
class Supervisor:
    log_dir: Path
    env: dict[str, str]
    cwd: Path
    children: list[Child] = field(default_factory=list)

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
        child = Child(
            name=name, proc=proc, log_path=log_path, last=last, optional=optional, log_offset=offset
        )
        self.children.append(child)
        return child

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
