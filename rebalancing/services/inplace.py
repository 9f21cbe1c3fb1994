"""Writes: the in-place role switch (steps in ``rebalancing.inplace``), run by one worker at a time.

``switch_in_place_start`` creates the Rebalance (``rebalance_switch_start`` calls it once its refusals
are checked) and enqueues the run. ``rebalance_in_place_run`` is what the Celery task calls: it claims
the Rebalance (a conditional update of its heartbeat), then stops routing to the instance, drains it,
unlinks, switches, re-links, verifies and resumes routing, logging every step on the Rebalance (the
topology page shows them live). On a failure it returns the instance to serving its old role. A worker
that died mid-switch leaves a stale heartbeat; ``rebalance_advance`` re-enqueues the run, which then
returns the instance to its old role and fails the Rebalance. ``instance_role_assign`` makes one role
assignment on an instance's engine and surfaces a refusal with the engine's own code (``LLM_EXIST_LINK``).

The engine is reached through the API server's pods proxy (``get``/``create`` on ``pods/proxy``), the
pod relabelled by merge patch (``patch`` on ``pods``); see clusters/access.py.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

import kube
from audit.services import audit_record
from controlplane.api.errors import Conflict
from kube.labels import NOT_SERVING, ROLE, SERVING_ROLE, serving_role, topology_selector
from rebalancing.inplace import (
    Instance,
    assignment,
    busy_count,
    engine_refusal,
    sglang_busy,
    sglang_live_role,
    status_problem,
)
from rebalancing.models import Rebalance, RebalanceKind, RebalanceState, RoleOverride
from rebalancing.services.steps import create
from rebalancing.services.steps import finish as _finish
from rebalancing.services.steps import log_step as _log

logger = logging.getLogger(__name__)
POLL_SECONDS = 0.2
# What "it serves" is checked by, per engine (MindIE: its status; SGLang: its health and live role).
VERIFIED = {"mindie": "RoleReady, every link ok", "sglang": "healthy, its live role in /server_info"}
PLAN = {
    "mindie": "unlink, switch, re-link (decode initiates)",
    "sglang": "switch (SGLang rebuilds its KV transfer side itself)",
}


def _step_timeout() -> float:
    """A role assignment (its links, the switch itself) must settle within this."""
    return float(settings.REBALANCE_STEP_TIMEOUT_SECONDS)


class StepFailed(Exception):
    def __init__(self, message: str, code: str = "in_place_step_failed") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class _Engine:
    """Calls to one topology's engines through the pods proxy."""

    def __init__(self, topology: Any) -> None:
        from clusters.selectors import cluster_connection

        self.topology = topology
        self.conn = cluster_connection(topology.cluster)
        self.namespace = topology.namespace
        self.port = int(topology.spec.get("port") or 8000)

    def call(self, pod: str, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        try:
            if method == "GET":
                response = kube.pod_proxy_get(self.conn, self.namespace, pod, self.port, path)
            else:
                response = kube.pod_proxy_post(self.conn, self.namespace, pod, self.port, path, body or {})
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
        if code != 200:
            ret, message = engine_refusal(code, body)
            raise StepFailed(f"{inst.name} refused POST /v1/role/{role}: {ret}: {message}", ret)

    def settle(self, inst: Instance, role: str, peers: list[Instance]) -> None:
        deadline = time.monotonic() + _step_timeout()
        while True:
            problem = status_problem(self.status(inst.name), role, peers)
            if not problem:
                return
            if time.monotonic() > deadline:
                raise StepFailed(
                    f"{inst.name} did not settle as {role} within {_step_timeout():.0f} s: {problem}",
                    "engine_not_ready",
                )
            time.sleep(POLL_SECONDS)

    def instances(self) -> dict[str, Instance]:
        """The topology's Ready prefill/decode pods, by name, with the role each serves now."""
        try:
            pods = kube.list_pods(self.conn, self.namespace, topology_selector(self.topology.pk))
        except kube.KubeError as error:
            raise StepFailed(
                f"the cluster cannot be asked for the pods: {error}", "cluster_unreachable"
            ) from None
        out = {}
        for pod in pods:
            template = pod.labels.get(ROLE, "")
            if pod.deletion_pending or not pod.ready or not pod.ip or template not in ("prefill", "decode"):
                continue
            out[pod.name] = Instance(pod.name, pod.ip, serving_role(pod.labels), template)
        return out

    def relabel(self, pod: str, role: str) -> None:
        try:
            kube.patch_pod_labels(self.conn, self.namespace, pod, {SERVING_ROLE: role})
        except kube.KubeError as error:
            raise StepFailed(f"{pod} cannot be relabelled: {error}", "relabel_failed") from None


def overrides_prune(*, topology: Any, instances: dict[str, Instance]) -> None:
    """Drop overrides whose pod is gone or serves its template's role again (a replaced pod)."""
    for override in RoleOverride.objects.filter(topology=topology):
        inst = instances.get(override.pod)
        if inst is None or inst.serving == inst.template:
            override.delete()


def switch_in_place_start(
    *,
    topology: Any,
    instance: str,
    source_role: str,
    target_role: str,
    target: tuple[int, int],
    path_reason: str,
    drain_timeout_seconds: float | None,
    actor: Any,
    source_ip: str | None,
) -> Rebalance:
    from django.conf import settings

    drain = float(drain_timeout_seconds or settings.REBALANCE_DRAIN_TIMEOUT_SECONDS)
    rebalance = create(
        topology=topology,
        kind=RebalanceKind.SWITCH_IN_PLACE,
        target=target,
        moves=[],
        actor=actor,
        params={
            "instance": instance,
            "target_role": target_role,
            "source_role": source_role,
            "path": "in_place",
            "why": path_reason,
            "drain_timeout_seconds": drain,
        },
    )
    _log(
        rebalance,
        f"Switch {instance} {source_role} → {target_role}, in place ({path_reason}): stop routing to it, "
        f"drain (at most {drain:.0f} s), {PLAN.get(topology.engine, PLAN['mindie'])}, verify, resume routing",
    )
    audit_record(
        action="rebalancing.switch_role",
        actor=actor,
        target=topology,
        source_ip=source_ip,
        detail={
            "rebalance": rebalance.pk,
            "instance": instance,
            "target_role": target_role,
            "path": "in_place",
            "text": f"{instance} → {target_role} (in place) by {rebalance.requested_by_label}",
        },
    )
    from rebalancing.tasks import run_in_place_switch

    run_in_place_switch.apply_async_on_commit((rebalance.pk,))
    return rebalance


def overrides_refresh(*, topology: Any) -> None:
    """Prune the topology's overrides against its live pods (asks the cluster only when there are any;
    a cluster that cannot be asked leaves them as they are)."""
    if not RoleOverride.objects.filter(topology=topology).exists():
        return
    try:
        found = _Engine(topology).instances()
    except StepFailed:
        return
    overrides_prune(topology=topology, instances=found)


def instance_role_assign(*, topology: Any, instance: str, role: str, peers: list[str]) -> None:
    """Give one instance's engine a role and its peer table (MindIE's ``POST /v1/role/{role}``).

    A refusal raises Conflict with the engine's code, e.g. ``LLM_EXIST_LINK`` when links are open."""
    engine = _Engine(topology)
    try:
        found = engine.instances()
        if instance not in found or any(p not in found for p in peers):
            unknown = [n for n in [instance, *peers] if n not in found]
            raise StepFailed(
                f"not running instances of {topology.name}: {', '.join(unknown)}", "unknown_instance"
            )
        engine.assign(found[instance], role, [found[p] for p in peers])
    except StepFailed as error:
        raise Conflict(error.message, code=error.code, fields={"instance": [error.message]}) from None


def _beat(rebalance: Rebalance) -> None:
    Rebalance.objects.filter(pk=rebalance.pk).update(heartbeat=timezone.now())


def _stale_after(rebalance: Rebalance) -> timedelta:
    drain = float(rebalance.params.get("drain_timeout_seconds") or 30)
    return timedelta(seconds=drain + 6 * _step_timeout())


def _claim(rebalance: Rebalance) -> str:
    """'fresh' when this worker starts the run, 'orphan' when it takes over a dead worker's, '' if not its."""
    now = timezone.now()
    mine = Rebalance.objects.filter(pk=rebalance.pk, state=RebalanceState.RUNNING)
    if mine.filter(heartbeat__isnull=True).update(heartbeat=now):
        return "fresh"
    stale = rebalance.heartbeat is not None and now - rebalance.heartbeat > _stale_after(rebalance)
    if stale and mine.filter(heartbeat=rebalance.heartbeat).update(heartbeat=now):
        return "orphan"
    return ""


def in_place_is_orphaned(rebalance: Rebalance) -> bool:
    """Whether no worker runs it: never claimed a minute after it started, or its heartbeat went stale."""
    now = timezone.now()
    if rebalance.heartbeat is None:
        return now - rebalance.created > timedelta(seconds=60)
    return now - rebalance.heartbeat > _stale_after(rebalance)


def _move(engine: _Engine, rebalance: Rebalance, inst: Instance, to_role: str) -> None:
    """Unlink, switch and re-link ``inst`` so that its engine serves ``to_role``, decode initiating."""
    others = [o for o in engine.instances().values() if o.name != inst.name]
    prefills = [o for o in others if o.serving == "prefill"]
    decodes = [o for o in others if o.serving == "decode"]
    current = str((engine.status(inst.name).get("service") or {}).get("currentRole") or inst.template)
    started = time.monotonic()
    engine.assign(inst, current, [])
    engine.settle(inst, current, [])
    dropped = []
    if current == "prefill":
        for decode in decodes:
            engine.assign(decode, "decode", prefills)
            engine.settle(decode, "decode", prefills)
            dropped.append(decode.name)
    _beat(rebalance)
    _log(
        rebalance,
        f"Unlinked {inst.name}: it closed its own KV links"
        + (f"; {', '.join(dropped)} closed theirs to it" if dropped else "")
        + f" ({time.monotonic() - started:.1f} s)",
    )
    if to_role != current:
        started = time.monotonic()
        engine.assign(inst, to_role, prefills if to_role == "decode" else decodes)
        engine.settle(inst, to_role, [])
        _beat(rebalance)
        _log(
            rebalance,
            f"Switched {inst.name} {current} → {to_role} (POST /v1/role/{to_role}, "
            f"{time.monotonic() - started:.1f} s)",
        )
    started = time.monotonic()
    as_new = Instance(inst.name, inst.ip, to_role, inst.template)
    if to_role == "decode":
        # The switch gave it its peers already; when nothing switched (a restore) its table is empty.
        engine.assign(inst, "decode", prefills)
        engine.settle(inst, "decode", prefills)
        linked = [f"{inst.name} → {p.name}" for p in prefills]
    else:
        linked = []
        for decode in decodes:
            engine.assign(decode, "decode", [*prefills, as_new])
            engine.settle(decode, "decode", [*prefills, as_new])
            linked.append(f"{decode.name} → {inst.name}")
    _beat(rebalance)
    _log(
        rebalance,
        f"Re-linked, decode initiating: {', '.join(linked) or 'no peers'} ok "
        f"({time.monotonic() - started:.1f} s)",
    )


def _move_sglang(engine: _Engine, rebalance: Rebalance, inst: Instance, to_role: str) -> None:
    """``POST /pd_role_switch``: SGLang rebuilds its KV transfer side for the new role itself."""
    code, info = engine.call(inst.name, "GET", "/server_info")
    current = sglang_live_role(info) if code == 200 else None
    if current is None:
        raise StepFailed(f"{inst.name} does not say which role it serves (GET /server_info: HTTP {code})")
    if current != to_role:
        started = time.monotonic()
        # SGLang refuses unless fully idle, which also counts KV still in transfer: retry that refusal
        # for as long as the drain may take.
        deadline = started + float(rebalance.params.get("drain_timeout_seconds") or 30)
        while True:
            code, answer = engine.call(inst.name, "POST", "/pd_role_switch", {"new_role": to_role})
            if code == 200 and isinstance(answer, dict) and answer.get("success"):
                break
            message = str(answer.get("message") or "") if isinstance(answer, dict) else ""
            if "not idle" in message and time.monotonic() < deadline:
                time.sleep(POLL_SECONDS)
                continue
            raise StepFailed(
                f"{inst.name} refused POST /pd_role_switch: {message or f'HTTP {code}'}", "sglang_refused"
            )
        _beat(rebalance)
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


def _relocate(engine: _Engine, rebalance: Rebalance, inst: Instance, to_role: str) -> None:
    if engine.topology.engine == "sglang":
        _move_sglang(engine, rebalance, inst, to_role)
    else:
        _move(engine, rebalance, inst, to_role)


def _drain(engine: _Engine, rebalance: Rebalance, inst: Instance, timeout: float) -> None:
    started = time.monotonic()
    idle_reads = 0
    left: int | None = None
    while idle_reads < 2:
        left = engine.busy(inst)
        idle_reads = idle_reads + 1 if left == 0 else 0
        if idle_reads < 2:
            if time.monotonic() - started > timeout:
                raise StepFailed(
                    f"drain timed out after {timeout:.0f} s with {left} requests still on {inst.name}",
                    "drain_timeout",
                )
            time.sleep(POLL_SECONDS)
    _beat(rebalance)
    _log(
        rebalance, f"Drained {inst.name}: no request running or waiting ({time.monotonic() - started:.1f} s)"
    )


def _restore(engine: _Engine, rebalance: Rebalance, inst: Instance, old: str, touched: bool) -> str:
    """Return ``inst`` to serving ``old``; '' when it does, else why it stays out of routing."""
    try:
        if touched:
            _relocate(engine, rebalance, inst, old)
        engine.relabel(inst.name, old)
    except StepFailed as error:
        return error.message
    _log(rebalance, f"Routing to {inst.name} as {old} again")
    return ""


def rebalance_in_place_run(*, rebalance_id: int) -> str:
    """Carry out one claimed in-place switch to its end (a no-op for a run another worker owns)."""
    rebalance = Rebalance.objects.select_related("topology", "topology__cluster").get(pk=rebalance_id)
    if rebalance.kind != RebalanceKind.SWITCH_IN_PLACE or not rebalance.is_active:
        return "done"
    claim = _claim(rebalance)
    if not claim:
        return "claimed elsewhere"
    params = rebalance.params
    name, target, old = str(params["instance"]), str(params["target_role"]), str(params["source_role"])
    engine = _Engine(rebalance.topology)
    touched = claim == "orphan"
    inst = Instance(name, "", old, old)
    try:
        found = engine.instances()
        if name not in found:
            raise StepFailed(f"{name} is not a Ready instance of the topology", "unknown_instance")
        inst = found[name]
        if claim == "orphan":
            raise StepFailed("the worker running this switch stopped", "worker_lost")
        engine.relabel(name, NOT_SERVING)
        _log(rebalance, f"Stopped routing new requests to {name} (serving-role label → {NOT_SERVING})")
        _drain(engine, rebalance, inst, float(params.get("drain_timeout_seconds") or 30))
        touched = True
        _relocate(engine, rebalance, inst, target)
        _log(rebalance, f"Verified: {name} serves {target} ({VERIFIED.get(rebalance.topology.engine, '')})")
        engine.relabel(name, target)
    except Exception as exc:  # whatever went wrong, the instance goes back to its old role
        if isinstance(exc, StepFailed):
            error = exc
        else:
            logger.exception("in-place switch #%s failed", rebalance.pk)
            error = StepFailed(f"unexpected error: {exc!r}", "internal_error")
        _log(rebalance, f"{error.message}; returning {name} to serving {old}")
        why = _restore(engine, rebalance, inst, old, touched) if inst.ip else "it is gone"
        tail = f"; {name} stays out of routing: {why}" if why else f"; {name} serves {old} again"
        with transaction.atomic():
            _finish(
                rebalance, ok=False, message=f"In-place switch failed ({error.code}): {error.message}{tail}"
            )
        return "failed"
    seconds = (timezone.now() - rebalance.created).total_seconds()
    with transaction.atomic():
        if target == inst.template:
            RoleOverride.objects.filter(topology=rebalance.topology, pod=name).delete()
        else:
            RoleOverride.objects.update_or_create(
                topology=rebalance.topology,
                pod=name,
                defaults={"template_role": inst.template, "serving_role": target, "rebalance": rebalance},
            )
        overrides_prune(
            topology=rebalance.topology,
            instances={**found, name: Instance(name, inst.ip, target, inst.template)},
        )
        _finish(
            rebalance,
            ok=True,
            message=f"Resumed routing: {name} serves {target} (in place, {seconds:.1f} s); its ModelServing "
            f"still counts it as {inst.template}, and a replaced pod comes back as {inst.template}",
        )
    return "succeeded"
