"""Demo steps: what `make demo` does after Tandem itself is up.

Each step says when it applies (`available`) and what it does (`run`, returning a line for the
console or None). Steps run in order; a failing step is reported and the demo goes on without it.
The steps act through the product's management commands and its REST API, as a user would:

1. start the sandbox cluster (`python -m sandbox up`), an emulated Kubernetes API with simulated
   prefill/decode engines; it starts empty every time;
2. register it (`manage.py register_cluster`);
3. deploy the demo P/D topology (`manage.py deploy_demo` creates it once and queues its deploy,
   followed here through the API); when it was deployed by an earlier run (a second `make demo`),
   the fresh sandbox has none of its objects, so it is re-applied through the API;
4. drive traffic through the topology's router (`python -m standalone.traffic`, the sandbox's
   load generator round after round) so hit rate, TTFT, TBT, tokens/s and KV links move;
5. wait until the API shows live metrics for it.

`TANDEM_DEMO_LOAD_RATE` (requests/s, default 2; 0 sends none) and `TANDEM_DEMO_LOAD_PATTERN`
(`phase`: prompt-heavy and generation-heavy halves of each minute, the default; `diurnal`;
`constant`) shape the traffic.

`SANDBOX_REAL_ENGINES=vllm` runs the demo topology's engines as real vLLM processes (the CPU build,
serving a tiny model: ``sandbox/engine/real.py``) instead of simulated ones; the real engine is
installed first when missing (``realengine.install``, about 3 minutes once), and the deploy is given
the minute each real engine takes to start.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from standalone.api import ApiError, TandemApi
from standalone.supervisor import Child, Supervisor, wait_for

SANDBOX_CLUSTER = "sandbox"
FINAL_STATES = ("succeeded", "failed", "rolled_back")


class StepFailed(Exception):
    """A demo step could not finish; the message says why and where the log is."""


@dataclass
class DemoContext:
    root: Path
    state_dir: Path
    env: dict[str, str]
    base_url: str
    supervisor: Supervisor
    admin_user: str = "admin"
    admin_password: str = ""
    say: Callable[[str], None] = print
    stopping: threading.Event = field(default_factory=threading.Event)
    started: float = field(default_factory=time.monotonic)
    # What the steps learnt, for the later ones and the closing summary.
    topology: dict[str, Any] | None = None
    marks: dict[str, float] = field(default_factory=dict)
    _api: TandemApi | None = None

    def mark(self, name: str) -> float:
        """Record when a milestone was reached (seconds since the runner started)."""
        self.marks[name] = time.monotonic() - self.started
        return self.marks[name]

    def api(self) -> TandemApi:
        if self._api is None:
            api = TandemApi(self.base_url)
            api.login(self.admin_user, self.admin_password)
            self._api = api
        return self._api

    def sleep(self, seconds: float) -> None:
        if self.stopping.wait(seconds):
            raise StepFailed("Tandem is stopping")

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

    def spawn(
        self, name: str, argv: list[str], *, ready_text: str, timeout: float = 60, optional: bool = False
    ) -> Child:
        """Start a long-running child (stopped with the rest) and wait until its log shows ready_text."""
        child = self.supervisor.spawn(name, argv, optional=optional)
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


def _last_line(result: subprocess.CompletedProcess[str], default: str) -> str:
    lines = result.stdout.strip().splitlines()
    return lines[-1] if lines else default


def real_engines(ctx: DemoContext) -> bool:
    return bool(ctx.env.get("SANDBOX_REAL_ENGINES", "").strip())


def _start_sandbox(ctx: DemoContext) -> str:
    if real_engines(ctx):
        from realengine import install

        try:
            install.install()
        except RuntimeError as error:
            raise StepFailed(str(error)) from None
    kubeconfig = _sandbox_kubeconfig(ctx)
    kubeconfig.unlink(missing_ok=True)  # a previous run's file points at a server that is gone
    # A fixed port and token: if the sandbox crashes and is restarted, the registered cluster still
    # points at it (it comes back empty, as a rebuilt cluster would).
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    token = secrets.token_urlsafe(24)
    ctx.spawn(
        "sandbox",
        [
            sys.executable,
            "-m",
            "sandbox",
            "up",
            "--kubeconfig",
            str(kubeconfig),
            "--port",
            str(port),
            f"--token={token}",  # one argument: a token may start with "-"
        ],
        ready_text="sandbox ready:",
        timeout=90,
    )
    engines = "real vLLM engines" if real_engines(ctx) else "simulated engines"
    return f"sandbox cluster up ({engines}); kubectl --kubeconfig {kubeconfig}-https get pods -A"


def _register_sandbox(ctx: DemoContext) -> str:
    result = ctx.manage(
        "register_cluster",
        "--name",
        SANDBOX_CLUSTER,
        "--kubeconfig",
        str(_sandbox_kubeconfig(ctx)),
        "--metrics-source",
        "direct",
    )
    return _last_line(result, f"cluster {SANDBOX_CLUSTER} registered")


def _demo_topology(ctx: DemoContext, name: str | None) -> dict[str, Any]:
    """The demo topology as the API shows it: by name on the sandbox cluster."""
    found = ctx.api().get("/api/v1/topologies/?page_size=200")["results"]
    on_sandbox = [t for t in found if t["cluster_name"] == SANDBOX_CLUSTER]
    chosen = [t for t in on_sandbox if t["name"] == name] if name else on_sandbox
    if name and not chosen:
        raise StepFailed(f"the API lists no topology {name!r} on the sandbox cluster")
    if not chosen:
        raise StepFailed("the API lists no topology on the sandbox cluster")
    return dict(chosen[0])


def _wait_deployment(ctx: DemoContext, deployment: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Follow a deployment through the API until it ends; a line every 15 s while it runs."""
    begin = time.monotonic()
    said_at = begin
    while deployment["state"] not in FINAL_STATES:
        now = time.monotonic()
        page = f"{ctx.base_url}/topologies/{deployment['topology']}/"
        if now - begin > timeout:
            state = deployment["state"]
            raise StepFailed(
                f"deployment #{deployment['id']} still {state} after {timeout:.0f} s; see {page}"
            )
        if now - said_at >= 15:
            said_at = now
            ctx.say(
                f"tandem: demo:   deployment #{deployment['id']} {deployment['state']}: "
                f"{deployment['pods_ready']}/{deployment['pods_total']} pods Ready after {now - begin:.0f} s "
                f"(progress and diagnosis: {page})"
            )
        ctx.sleep(0.5)
        deployment = ctx.api().get(f"/api/v1/deployments/{deployment['id']}/")
    if deployment["state"] != "succeeded":
        findings = "; ".join(f"{d['message']} — {d['fix']}" for d in deployment.get("diagnosis") or [])
        raise StepFailed(
            f"deployment #{deployment['id']} {deployment['state']}: {deployment['error']}"
            + (f"\n        {findings}" if findings else "")
        )
    return deployment


def demo_topology_name(line: str) -> str | None:
    """The topology named by deploy_demo's last line ("demo topology NAME: deployment #3 queued",
    "demo topology NAME already running revision 2"): a topology name never ends in punctuation."""
    named = re.match(r"demo topology ([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)", line)
    return named.group(1) if named else None


def _deploy_demo(ctx: DemoContext) -> str:
    # deploy_demo creates the topology (once) and queues its deploy; the worker started with Tandem
    # runs it, and this follows it through the API (all pods Ready, or the diagnosis).
    said = _last_line(ctx.manage("deploy_demo", "--cluster", SANDBOX_CLUSTER, timeout=120), "")
    topology = _demo_topology(ctx, demo_topology_name(said))
    history = ctx.api().get(f"/api/v1/deployments/?topology={topology['id']}")["results"]
    verb = "deployed"
    if "already running" in said or not history:
        # Deployed in an earlier run, on an earlier sandbox: this one starts empty.
        try:
            deployment = ctx.api().post(f"/api/v1/topologies/{topology['id']}/reapply/")
        except ApiError as error:
            raise StepFailed(f"re-applying the demo topology failed: {error}") from None
        verb = "re-applied on the fresh sandbox"
    else:
        deployment = history[0]
    deployment = _wait_deployment(ctx, deployment, timeout=420 if real_engines(ctx) else 180)
    ctx.topology = topology
    ctx.mark("topology ready")
    return (
        f"demo topology {topology['name']} {verb}: revision {deployment['revision']}, "
        f"{deployment['pods_ready']}/{deployment['pods_total']} pods Ready\n"
        f"        {ctx.base_url}/topologies/{topology['id']}/"
    )


def _load_rate(ctx: DemoContext) -> float:
    raw = ctx.env.get("TANDEM_DEMO_LOAD_RATE", "").strip() or "2"
    try:
        rate = float(raw)
    except ValueError:
        raise StepFailed(f"TANDEM_DEMO_LOAD_RATE={raw!r} is not a number; use e.g. 2 (requests/s)") from None
    if not 0 <= rate <= 50:
        raise StepFailed(f"TANDEM_DEMO_LOAD_RATE={raw!r} is out of range; use 0 (no traffic) to 50")
    return rate


def _load_pattern(ctx: DemoContext) -> str:
    pattern = ctx.env.get("TANDEM_DEMO_LOAD_PATTERN", "").strip() or "phase"
    if pattern not in ("phase", "diurnal", "constant"):
        raise StepFailed(f"TANDEM_DEMO_LOAD_PATTERN={pattern!r}; use phase, diurnal or constant")
    return pattern


def _drive_traffic(ctx: DemoContext) -> str:
    assert ctx.topology is not None
    rate, pattern = _load_rate(ctx), _load_pattern(ctx)
    if rate == 0:
        return "no demo traffic (TANDEM_DEMO_LOAD_RATE=0)"
    routing = (ctx.topology.get("spec") or {}).get("routing") or {}
    model = routing.get("model_name") or ctx.topology["model_name"]
    child = ctx.spawn(
        "traffic",
        [
            sys.executable,
            "-m",
            "standalone.traffic",
            "--kubeconfig",
            str(_sandbox_kubeconfig(ctx)),
            "--topology",
            str(ctx.topology["id"]),
            "--model",
            model,
            "--rate",
            f"{rate:g}",
            "--pattern",
            pattern,
        ],
        ready_text="sending ",
        timeout=30,
        optional=True,
    )
    sending = next(line for line in child.log_text().splitlines() if line.startswith("sending "))
    return f"{sending.removeprefix('sending ')} (log: {child.log_path})"


def live_summary(latest: dict[str, Any]) -> str | None:
    """One line describing a fresh telemetry snapshot, or None while it shows no traffic yet."""
    totals = latest.get("totals") or {}
    pods = latest.get("pods") or []
    flowing = (
        totals.get("gen_tps") and totals.get("ttft_p50") is not None and totals.get("tbt_p50") is not None
    )
    if not pods or not totals.get("links_up") or not flowing:
        return None

    def ms(seconds: float | None) -> str:
        return "–" if seconds is None else f"{seconds * 1000:.0f} ms"

    hit = totals.get("hit_rate")
    return (
        f"{len(pods)} pods, {totals['links_up']} KV link(s) up; hit rate "
        f"{'–' if hit is None else f'{hit:.0%}'}, TTFT p50 {ms(totals.get('ttft_p50'))}, "
        f"TBT p50 {ms(totals.get('tbt_p50'))}, {totals.get('gen_tps') or 0:.0f} output tokens/s"
    )


def _wait_live_metrics(ctx: DemoContext) -> str:
    assert ctx.topology is not None
    path = f"/api/v1/topologies/{ctx.topology['id']}/metrics/latest/"
    deadline = time.monotonic() + 60
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            last = ctx.api().get(path)
        except ApiError as error:
            if error.status != 404:  # 404: no snapshot collected yet
                raise StepFailed(f"reading live metrics failed: {error}") from None
        summary = live_summary(last)
        if summary is not None and time.time() - float(last.get("ts") or 0) < 15:
            ctx.mark("first live metrics")
            return f"live metrics: {summary}"
        ctx.sleep(0.5)
    totals = last.get("totals") or {}
    raise StepFailed(
        "no live metrics within 60 s (pods "
        f"{len(last.get('pods') or [])}, links up {totals.get('links_up')}, "
        f"requests/s {totals.get('requests_ps')}); see {ctx.state_dir / 'logs'}"
    )


def _connect_gateway(ctx: DemoContext) -> str:
    """Point the gateway at the demo topology's router, as an operator enters a serving endpoint."""
    from standalone.traffic import find_router_url

    assert ctx.topology is not None
    url = find_router_url(str(_sandbox_kubeconfig(ctx)), int(ctx.topology["id"]))
    if not url:
        raise StepFailed("the demo topology's router has no address yet")
    try:
        ctx.api().patch(f"/api/v1/topologies/{ctx.topology['id']}/gateway/", {"endpoint_url": url})
    except ApiError as error:
        raise StepFailed(f"setting the gateway's serving endpoint failed: {error}") from None
    return (
        f"gateway serves {ctx.topology['model_name']} at {ctx.base_url}/v1 (router {url}); "
        f"issue an inference key on {ctx.base_url}/keys/ to call it"
    )


def _traffic_wanted(ctx: DemoContext) -> bool:
    return ctx.topology is not None


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
        name="deploy the demo P/D topology",
        available=lambda ctx: (
            ctx.has_command("deployments", "deploy_demo") and _sandbox_kubeconfig(ctx).exists()
        ),
        run=_deploy_demo,
    ),
    DemoStep(name="connect the gateway to it", available=_traffic_wanted, run=_connect_gateway),
    DemoStep(name="drive traffic through its router", available=_traffic_wanted, run=_drive_traffic),
    DemoStep(
        name="wait for live metrics",
        available=lambda ctx: ctx.topology is not None and "traffic" in ctx.supervisor.names(),
        run=_wait_live_metrics,
    ),
]
