"""The engine side of an in-place role switch: calls to one topology's engines through the API server's
pods proxy, and the steps that move an instance between roles on MindIE (unlink, switch, re-link,
decode initiating) and on SGLang (``POST /pd_role_switch``), each logged on the Rebalance.

The engine is reached through the pods proxy (``get``/``create`` on ``pods/proxy``), the pod relabelled
by merge patch (``patch`` on ``pods``); see clusters/access.py. ``rebalancing.services.inplace`` runs
the switch and decides what a failure means.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

from django.conf import settings
from django.utils import timezone

import kube
from kube.labels import (
    NOT_SERVING,
    ROLE,
    SERVING_ROLE,
    STAGED,
    STAGED_BY_PLANNER,
    serving_role,
    topology_selector,
)
from rebalancing.inplace import (
    DRAIN_TIMEOUT_SECONDS,
    Instance,
    ascend_devices,
    assignment,
    busy_count,
    engine_refusal,
    role_accepted,
    sglang_busy,
    sglang_live_role,
    status_problem,
)
from rebalancing.models import Rebalance
from rebalancing.services.steps import log_step as _log

POLL_SECONDS = 0.2
# What "it serves" is checked by, per engine (MindIE: its status; SGLang: its health and live role).
VERIFIED = {"mindie": "RoleReady, every link ok", "sglang": "healthy, its live role in /server_info"}
PLAN = {
    "mindie": "unlink, switch, re-link (decode initiates)",
    "sglang": "switch (SGLang rebuilds its KV transfer side itself)",
}


def step_timeout() -> float:
    """A role assignment (its links, the switch itself) must settle within this."""
    return float(settings.REBALANCE_STEP_TIMEOUT_SECONDS)


class StepFailed(Exception):
    def __init__(self, message: str, code: str = "in_place_step_failed") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class Engine:
    """Calls to one topology's engines through the pods proxy."""

    def __init__(self, topology: Any) -> None:
        from clusters.selectors import cluster_connection

        self.topology = topology
        self.conn = cluster_connection(topology.cluster)
        self.namespace = topology.namespace
        self.port = int(topology.spec.get("port") or 8000)

    def call(
        self,
        pod: str,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        read_seconds: float | None = None,
    ) -> tuple[int, Any]:
        try:
            if method == "GET":
                response = kube.pod_proxy_get(self.conn, self.namespace, pod, self.port, path)
            else:
                response = kube.pod_proxy_post(
                    self.conn, self.namespace, pod, self.port, path, body or {}, read_seconds=read_seconds
                )
        except kube.KubeError as error:
            raise StepFailed(f"{pod} cannot be reached: {error}", "cluster_unreachable") from None
        try:
            data = json.loads(response.data or b"null")
        except (ValueError, UnicodeDecodeError):
            data = None
        if isinstance(data, dict) and data.get("kind") == "Status":
            failure = kube.describe_proxy_failure(response.status, response.data)
            raise StepFailed(f"{method} {path} on {pod}: {failure}", "proxy_failed")
        return response.status, data

    def text(self, pod: str, path: str) -> str:
        try:
            response = kube.pod_proxy_get(self.conn, self.namespace, pod, self.port, path)
        except kube.KubeError as error:
            raise StepFailed(f"{pod} cannot be reached: {error}", "cluster_unreachable") from None
        if response.status != 200:
            failure = kube.describe_proxy_failure(response.status, response.data)
            raise StepFailed(f"GET {path} on {pod}: {failure}", "engine_status_failed")
        return response.data.decode("utf-8", "replace")

    def busy(self, inst: Instance) -> int | None:
        """Requests running or waiting on the instance, as its engine reports them."""
        if self.topology.engine == "sglang":
            return sglang_busy(self.text(inst.name, "/metrics"))
        return busy_count(self.status(inst.name))

    def status(self, pod: str) -> dict[str, Any]:
        code, body = self.call(pod, "GET", "/v1/status")
        if code != 200 or not isinstance(body, dict):
            raise StepFailed(f"{pod} answered HTTP {code} to GET /v1/status", "engine_status_failed")
        return body

    def assign(self, inst: Instance, role: str, peers: list[Instance]) -> None:
        code, body = self.call(inst.name, "POST", f"/v1/role/{role}", assignment(inst, peers))
        if not role_accepted(code, body):
            ret, message = engine_refusal(code, body)
            raise StepFailed(f"{inst.name} refused POST /v1/role/{role}: {ret}: {message}", ret)

    def settle(self, inst: Instance, role: str, peers: list[Instance], rebalance: Rebalance) -> None:
        deadline = time.monotonic() + step_timeout()
        while True:
            beat(rebalance)  # a long settle is still a live run
            problem = status_problem(self.status(inst.name), role, peers)
            if not problem:
                return
            if time.monotonic() > deadline:
                raise StepFailed(
                    f"{inst.name} did not settle as {role} within {step_timeout():.0f} s: {problem}",
                    "engine_not_ready",
                )
            time.sleep(POLL_SECONDS)

    def instances(self, *, ready_only: bool = True) -> dict[str, Instance]:
        """The topology's Ready prefill/decode pods (with ``ready_only=False`` every one not being
        deleted, Ready or not), by name, with the role each serves now."""
        try:
            pods = kube.list_pods(self.conn, self.namespace, topology_selector(self.topology.pk))
        except kube.KubeError as error:
            raise StepFailed(
                f"the cluster cannot be asked for the pods: {error}", "cluster_unreachable"
            ) from None
        out = {}
        for pod in pods:
            template = pod.labels.get(ROLE, "")
            ready = pod.ready and bool(pod.ip)
            if pod.deletion_pending or template not in ("prefill", "decode") or (ready_only and not ready):
                continue
            out[pod.name] = Instance(
                pod.name,
                pod.ip,
                serving_role(pod.labels),
                template,
                ascend_devices(pod.annotations),
                pod.restarts,
                ready,
            )
        return out

    def relabel(self, pod: str, role: str, *, staged: bool = False) -> None:
        """Route ``pod`` as ``role`` (or out of routing: NOT_SERVING); ``staged`` marks it as taken out by
        the planner ahead of a move it staged, any other relabel clears that mark."""
        labels: dict[str, str | None] = {SERVING_ROLE: role, STAGED: STAGED_BY_PLANNER if staged else None}
        try:
            kube.patch_pod_labels(self.conn, self.namespace, pod, labels)
        except kube.KubeError as error:
            raise StepFailed(f"{pod} cannot be relabelled: {error}", "relabel_failed") from None


class ClaimLost(Exception):
    """Another worker took the run over (this one's heartbeat went stale): stop at once and touch nothing
    more; the new owner returns the instance in hand to its old role."""


def beat(rebalance: Rebalance) -> None:
    """Renew this worker's claim on the run: only while the heartbeat is still the one it wrote last
    (a worker that took over a stale run wrote its own)."""
    now = timezone.now()
    if not Rebalance.objects.filter(pk=rebalance.pk, heartbeat=rebalance.heartbeat).update(heartbeat=now):
        raise ClaimLost(f"rebalance #{rebalance.pk} is run by another worker now")
    rebalance.heartbeat = now


def mindie_relocate(engine: Engine, rebalance: Rebalance, inst: Instance, to_role: str) -> None:
    """Unlink, switch and re-link ``inst`` so that its engine serves ``to_role``, decode initiating."""
    # Instances of the same change still draining are out of routing but keep their role (and their
    # links: a draining prefill still holds KV its decodes must pull).
    pending = {s["instance"]: s["source_role"] for s in rebalance.params.get("switches") or []}
    others = [
        replace(o, serving=pending.get(o.name, o.serving)) if o.serving == NOT_SERVING else o
        for o in engine.instances().values()
        if o.name != inst.name
    ]
    prefills = [o for o in others if o.serving == "prefill"]
    decodes = [o for o in others if o.serving == "decode"]
    current = str((engine.status(inst.name).get("service") or {}).get("currentRole") or inst.template)
    started = time.monotonic()
    engine.assign(inst, current, [])
    engine.settle(inst, current, [], rebalance)
    dropped = []
    if current == "prefill":
        for decode in decodes:
            engine.assign(decode, "decode", prefills)
            engine.settle(decode, "decode", prefills, rebalance)
            dropped.append(decode.name)
    beat(rebalance)
    _log(
        rebalance,
        f"Unlinked {inst.name}: it closed its own KV links"
        + (f"; {', '.join(dropped)} closed theirs to it" if dropped else "")
        + f" ({time.monotonic() - started:.1f} s)",
    )
    if to_role != current:
        started = time.monotonic()
        engine.assign(inst, to_role, prefills if to_role == "decode" else decodes)
        engine.settle(inst, to_role, [], rebalance)
        beat(rebalance)
        _log(
            rebalance,
            f"Switched {inst.name} {current} → {to_role} (POST /v1/role/{to_role}, "
            f"{time.monotonic() - started:.1f} s)",
        )
    started = time.monotonic()
    as_new = replace(inst, serving=to_role)
    if to_role == "decode":
        # The switch gave it its peers already; when nothing switched (a restore) its table is empty.
        engine.assign(inst, "decode", prefills)
        engine.settle(inst, "decode", prefills, rebalance)
        linked = [f"{inst.name} → {p.name}" for p in prefills]
    else:
        linked = []
        for decode in decodes:
            engine.assign(decode, "decode", [*prefills, as_new])
            engine.settle(decode, "decode", [*prefills, as_new], rebalance)
            linked.append(f"{decode.name} → {inst.name}")
    beat(rebalance)
    _log(
        rebalance,
        f"Re-linked, decode initiating: {', '.join(linked) or 'no peers'} ok "
        f"({time.monotonic() - started:.1f} s)",
    )


def sglang_relocate(engine: Engine, rebalance: Rebalance, inst: Instance, to_role: str) -> None:
    """``POST /pd_role_switch``: SGLang rebuilds its KV transfer side for the new role itself."""
    code, info = engine.call(inst.name, "GET", "/server_info")
    current = sglang_live_role(info) if code == 200 else None
    if current is None:
        raise StepFailed(f"{inst.name} does not say which role it serves (GET /server_info: HTTP {code})")
    if current != to_role:
        started = time.monotonic()
        # SGLang refuses unless fully idle, which also counts KV still in transfer: retry that refusal
        # for as long as the drain may take.
        deadline = started + float(rebalance.params.get("drain_timeout_seconds") or DRAIN_TIMEOUT_SECONDS)
        while True:
            # SGLang answers once it has rebuilt its disaggregation side: allow it the step timeout.
            code, answer = engine.call(
                inst.name, "POST", "/pd_role_switch", {"new_role": to_role}, read_seconds=step_timeout()
            )
            if code == 200 and isinstance(answer, dict) and answer.get("success"):
                break
            message = str(answer.get("message") or "") if isinstance(answer, dict) else ""
            if "not idle" in message and time.monotonic() < deadline:
                time.sleep(POLL_SECONDS)
                continue
            if "restart required" in message:
                # SGLang has no rollback: a failed rebuild leaves the instance unhealthy until restarted.
                raise StepFailed(
                    f"{inst.name} failed POST /pd_role_switch and needs a restart ({message}); delete the "
                    "pod and its ModelServing starts a new one in its template role",
                    "sglang_unhealthy",
                )
            raise StepFailed(
                f"{inst.name} refused POST /pd_role_switch: {message or f'HTTP {code}'}", "sglang_refused"
            )
        beat(rebalance)
        _log(
            rebalance,
            f"Switched {inst.name} {current} → {to_role} (POST /pd_role_switch, "
            f"{time.monotonic() - started:.1f} s): SGLang tore its KV transfer side down and rebuilt it; "
            "decodes reach a prefill through its bootstrap server per request, so no links are closed or "
            "opened from outside",
        )
    code, info = engine.call(inst.name, "GET", "/server_info")
    if code != 200 or sglang_live_role(info) != to_role:
        raise StepFailed(f"{inst.name} does not report {to_role} after the switch", "engine_not_ready")
    code, _ = engine.call(inst.name, "GET", "/health")
    if code != 200:
        raise StepFailed(
            f"{inst.name} answers HTTP {code} to GET /health after the switch", "engine_not_ready"
        )


def relocate(engine: Engine, rebalance: Rebalance, inst: Instance, to_role: str) -> None:
    if engine.topology.engine == "sglang":
        sglang_relocate(engine, rebalance, inst, to_role)
    else:
        mindie_relocate(engine, rebalance, inst, to_role)


def drain(engine: Engine, rebalance: Rebalance, inst: Instance, timeout: float) -> None:
    started = time.monotonic()
    idle_reads = 0
    left: int | None = None
    while idle_reads < 2:
        left = engine.busy(inst)
        idle_reads = idle_reads + 1 if left == 0 else 0
        if idle_reads < 2:
            if time.monotonic() - started > timeout:
                held = (
                    f"{left} requests still on {inst.name}"
                    if left is not None
                    else f"{inst.name}'s engine not saying how many requests it holds"
                )
                raise StepFailed(f"drain timed out after {timeout:.0f} s with {held}", "drain_timeout")
            time.sleep(POLL_SECONDS)
    beat(rebalance)
    _log(
        rebalance, f"Drained {inst.name}: no request running or waiting ({time.monotonic() - started:.1f} s)"
    )
