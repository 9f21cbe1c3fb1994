"""Demo steps: what `make demo` does after Tandem itself is up.

Each step says when it applies (`available`) and what it does (`run`, returning a line for the
console or None). Steps run in order; a failing step is reported and the demo goes on without it.
Add a step by appending to DEMO_STEPS — e.g. "deploy the demo topology" through the product's
services (`python manage.py ...` via `ctx.manage`) once a command for it exists.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from standalone.supervisor import Child, Supervisor, wait_for


class StepFailed(Exception):
    """A demo step could not finish; the message says why and where the log is."""


@dataclass
class DemoContext:
    root: Path
    state_dir: Path
    env: dict[str, str]
    base_url: str
    supervisor: Supervisor
    stopping: threading.Event = field(default_factory=threading.Event)

    def manage(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run `manage.py` with the standalone environment; raises StepFailed on a non-zero exit,
        and ends the command at once when Tandem is asked to stop."""
        proc = subprocess.Popen(
            [sys.executable, "manage.py", *args],
            cwd=self.root,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                stdout, stderr = proc.communicate(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if self.stopping.is_set() or time.monotonic() > deadline:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.communicate()
                    raise StepFailed(f"manage.py {args[0]} stopped before it finished") from None
        result = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
        if result.returncode != 0:
            detail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-6:])
            raise StepFailed(f"manage.py {args[0]} exited with {result.returncode}:\n{detail}")
        return result

    def spawn(self, name: str, argv: list[str], *, ready_text: str, timeout: float = 60) -> Child:
        """Start a long-running child (stopped with the rest) and wait until its log shows ready_text."""
        child = self.supervisor.spawn(name, argv)
        if not wait_for(
            lambda: child.log_contains(ready_text), timeout=timeout, child=child, stop=self.stopping
        ):
            if self.stopping.is_set():
                raise StepFailed(f"{name} stopped before it was ready")
            raise StepFailed(f"{name} did not become ready; see {child.log_path}\n{child.log_tail()}")
        return child

    def has_command(self, app: str, command: str) -> bool:
        return (self.root / app / "management" / "commands" / f"{command}.py").exists()


@dataclass(frozen=True)
class DemoStep:
    name: str
    available: Callable[[DemoContext], bool]
    run: Callable[[DemoContext], str | None]


def _sandbox_kubeconfig(ctx: DemoContext) -> Path:
    return ctx.state_dir / "sandbox.kubeconfig"


def _start_sandbox(ctx: DemoContext) -> str:
    kubeconfig = _sandbox_kubeconfig(ctx)
    ctx.spawn(
        "sandbox",
        [sys.executable, "-m", "sandbox", "up", "--kubeconfig", str(kubeconfig)],
        ready_text="sandbox ready:",
        timeout=90,
    )
    return f"sandbox cluster up (kubeconfig {kubeconfig})"


def _register_sandbox(ctx: DemoContext) -> str:
    ctx.manage("register_cluster", "--name", "sandbox", "--kubeconfig", str(_sandbox_kubeconfig(ctx)))
    return "sandbox cluster registered as 'sandbox'"


def _deploy_demo(ctx: DemoContext) -> str:
    # The worker started with Tandem runs the deploy; this waits for it (all pods Ready, or a diagnosis).
    result = ctx.manage("deploy_demo", "--cluster", "sandbox", "--wait", "180", timeout=240)
    return result.stdout.strip().splitlines()[-1] if result.stdout.strip() else "demo topology deployed"


DEMO_STEPS: list[DemoStep] = [
    DemoStep(
        name="start the sandbox cluster",
        available=lambda ctx: (ctx.root / "sandbox" / "__main__.py").exists(),
        run=_start_sandbox,
    ),
    DemoStep(
        name="register the sandbox cluster",
        available=lambda ctx: (
            ctx.has_command("clusters", "register_cluster") and _sandbox_kubeconfig(ctx).exists()
        ),
        run=_register_sandbox,
    ),
    DemoStep(
        name="deploy the demo topology",
        available=lambda ctx: (
            ctx.has_command("deployments", "deploy_demo") and _sandbox_kubeconfig(ctx).exists()
        ),
        run=_deploy_demo,
    ),
]
