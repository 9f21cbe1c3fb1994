"""Writes: carrying out in-place role switches (started by ``rebalancing.services.inplace_start``; the
engine steps are ``rebalancing.services.engine_steps``), one worker at a time.

``rebalance_in_place_run`` is what the Celery task calls: it claims the Rebalance (a conditional update
of its heartbeat), takes every instance that changes role out of routing (several drain together), then
one instance at a time drains it, unlinks, switches, re-links, verifies and resumes routing, logging every
step on the Rebalance (the topology page shows them live). On a failure the instance in hand goes back to
serving its old role, the ones not yet switched are routed as before, the switches already done stand,
and the Rebalance fails saying so. A worker that died mid-switch leaves a stale heartbeat;
``rebalance_advance`` re-enqueues the run, which then returns that instance to its old role and fails the
Rebalance. ``instance_role_assign`` makes one role assignment on an instance's engine and surfaces a
refusal with the engine's own code (``LLM_EXIST_LINK``).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from controlplane.api.errors import Conflict
from kube.labels import NOT_SERVING
from rebalancing.inplace import DRAIN_TIMEOUT_SECONDS, Instance, devices_problem
from rebalancing.models import Rebalance, RebalanceKind, RebalanceState, RoleOverride
from rebalancing.services.engine_steps import (
    VERIFIED,
    ClaimLost,
    Engine,
    StepFailed,
    drain,
    relocate,
    step_timeout,
)
from rebalancing.services.overrides import overrides_end_restarted, overrides_prune
from rebalancing.services.steps import finish as _finish
from rebalancing.services.steps import log_step as _log

logger = logging.getLogger(__name__)


def switches_of(rebalance: Rebalance) -> list[dict[str, str]]:
    """The switches an in-place Rebalance carries out, in order: [{instance, source_role, target_role}]."""
    listed = rebalance.params.get("switches")
    if isinstance(listed, list):
        return [dict(s) for s in listed]
    params = rebalance.params
    return [
        {
            "instance": str(params["instance"]),
            "source_role": str(params["source_role"]),
            "target_role": str(params["target_role"]),
        }
    ]


def is_in_place(rebalance: Rebalance) -> bool:
    return rebalance.kind == RebalanceKind.SWITCH_IN_PLACE or rebalance.params.get("path") == "in_place"


def instance_role_assign(*, topology: Any, instance: str, role: str, peers: list[str]) -> None:
    """Give one instance's engine a role and its peer table (MindIE's ``POST /v1/role/{role}``).

    A refusal raises Conflict with the engine's code, e.g. ``LLM_EXIST_LINK`` when links are open."""
    engine = Engine(topology)
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


def _stale_after(rebalance: Rebalance) -> timedelta:
    drain = float(rebalance.params.get("drain_timeout_seconds") or DRAIN_TIMEOUT_SECONDS)
    return timedelta(seconds=drain + 6 * step_timeout())


def _claim(rebalance: Rebalance) -> str:
    """'fresh' when this worker starts the run, 'orphan' when it takes over a dead worker's, '' if not its."""
    now = timezone.now()
    mine = Rebalance.objects.filter(pk=rebalance.pk, state=RebalanceState.RUNNING)
    if mine.filter(heartbeat__isnull=True).update(heartbeat=now):
        rebalance.heartbeat = now  # what beat() renews: the claim is this worker's while it is unchanged
        return "fresh"
    stale = rebalance.heartbeat is not None and now - rebalance.heartbeat > _stale_after(rebalance)
    if stale and mine.filter(heartbeat=rebalance.heartbeat).update(heartbeat=now):
        rebalance.heartbeat = now
        return "orphan"
    return ""


def in_place_is_orphaned(rebalance: Rebalance) -> bool:
    """Whether no worker runs it: never claimed a minute after it started, or its heartbeat went stale."""
    now = timezone.now()
    if rebalance.heartbeat is None:
        return now - rebalance.created > timedelta(seconds=60)
    return now - rebalance.heartbeat > _stale_after(rebalance)


def _restore(engine: Engine, rebalance: Rebalance, inst: Instance, old: str, touched: bool) -> str:
    """Return ``inst`` to serving ``old``; '' when it does, else why it stays out of routing."""
    try:
        if touched:
            relocate(engine, rebalance, inst, old)
        engine.relabel(inst.name, old)
    except StepFailed as error:
        return error.message
    _log(rebalance, f"Routing to {inst.name} as {old} again")
    return ""


def _unroute(engine: Engine, rebalance: Rebalance, switches: list[dict[str, str]]) -> None:
    """Take every instance of a multi-switch change out of routing at once, so their drains overlap (the
    others of their role carry the load: the split the change goes to)."""
    for switch in switches:
        engine.relabel(switch["instance"], NOT_SERVING)
    names = ", ".join(s["instance"] for s in switches)
    _log(
        rebalance,
        f"Stopped routing new requests to {names} (serving-role label → {NOT_SERVING}): they drain "
        "together, and each is switched in turn once drained",
    )


def _reroute(engine: Engine, rebalance: Rebalance, switches: list[dict[str, str]]) -> None:
    """Route the instances whose switch will not happen as their old role again."""
    for switch in switches:
        try:
            engine.relabel(switch["instance"], switch["source_role"])
            _log(
                rebalance, f"Routing to {switch['instance']} as {switch['source_role']} again (not switched)"
            )
        except StepFailed as error:
            _log(rebalance, f"{switch['instance']} stays out of routing: {error.message}")


def _switch_one(
    engine: Engine, rebalance: Rebalance, switch: dict[str, str], orphan: bool, unrouted: bool = False
) -> None:
    """One instance out of routing (unless ``unrouted`` already), drained, moved to its target role,
    verified, routed again; on a failure it serves its old role again (or stays out of routing, saying
    why) and StepFailed says why."""
    name, target, old = switch["instance"], switch["target_role"], switch["source_role"]
    touched = orphan
    inst = Instance(name, "", old, old)
    try:
        present = engine.instances(ready_only=False)  # Ready or not: the overrides are kept against them
        found = {n: i for n, i in present.items() if i.ready}
        if name not in found:
            raise StepFailed(f"{name} is not a Ready instance of the topology", "unknown_instance")
        inst = found[name]
        if orphan:
            raise StepFailed("the worker running this switch stopped", "worker_lost")
        if rebalance.topology.engine == "mindie":
            problem = devices_problem(list(found.values()))
            if problem:
                raise StepFailed(problem, "no_npu_devices")
        if not unrouted:
            engine.relabel(name, NOT_SERVING)
            _log(rebalance, f"Stopped routing new requests to {name} (serving-role label → {NOT_SERVING})")
        timeout = float(rebalance.params.get("drain_timeout_seconds") or DRAIN_TIMEOUT_SECONDS)
        drain(engine, rebalance, inst, timeout)
        touched = True
        relocate(engine, rebalance, inst, target)
        _log(rebalance, f"Verified: {name} serves {target} ({VERIFIED.get(rebalance.topology.engine, '')})")
        engine.relabel(name, target)
    except ClaimLost:
        raise  # the worker that took over owns the instance now
    except Exception as exc:  # whatever went wrong, the instance goes back to its old role
        if isinstance(exc, StepFailed):
            error = exc
        else:
            logger.exception("in-place switch #%s failed", rebalance.pk)
            error = StepFailed(f"unexpected error: {exc!r}", "internal_error")
        _log(rebalance, f"{error.message}; returning {name} to serving {old}")
        why = _restore(engine, rebalance, inst, old, touched) if inst.ip else "it is gone"
        tail = f"; {name} stays out of routing: {why}" if why else f"; {name} serves {old} again"
        raise StepFailed(error.message + tail, error.code) from None
    with transaction.atomic():
        if target == inst.template:
            RoleOverride.objects.filter(topology=rebalance.topology, pod=name).delete()
        else:
            RoleOverride.objects.update_or_create(
                topology=rebalance.topology,
                pod=name,
                defaults={
                    "template_role": inst.template,
                    "serving_role": target,
                    "rebalance": rebalance,
                    "restarts": inst.restarts,
                },
            )
    restarted = overrides_prune(
        topology=rebalance.topology, instances={**present, name: replace(inst, serving=target)}
    )
    overrides_end_restarted(engine=engine, topology=rebalance.topology, restarted=restarted)


def _failed(rebalance: Rebalance, error: StepFailed) -> str:
    with transaction.atomic():
        _finish(rebalance, ok=False, message=f"In-place switches failed ({error.code}): {error.message}")
    return "failed"


def rebalance_in_place_run(*, rebalance_id: int) -> str:
    """Carry out one claimed in-place Rebalance to its end (a no-op for a run another worker owns, and
    a stop as soon as another worker took it over)."""
    rebalance = Rebalance.objects.select_related("topology", "topology__cluster").get(pk=rebalance_id)
    if not is_in_place(rebalance) or not rebalance.is_active:
        return "done"
    claim = _claim(rebalance)
    if not claim:
        return "claimed elsewhere"
    try:
        return _run_claimed(rebalance, claim)
    except ClaimLost as lost:
        logger.warning("in-place switch #%s: stopped, %s", rebalance.pk, lost)
        return "claimed elsewhere"


def _run_claimed(rebalance: Rebalance, claim: str) -> str:
    engine = Engine(rebalance.topology)
    switches = switches_of(rebalance)
    several = len(switches) > 1
    unrouted = several and claim == "fresh"
    if unrouted:
        pending = switches[rebalance.next_move :]
        try:
            if rebalance.topology.engine == "mindie":  # checked before any pod leaves routing
                problem = devices_problem(list(engine.instances().values()))
                if problem:
                    raise StepFailed(problem, "no_npu_devices")
        except StepFailed as error:
            return _failed(rebalance, error)
        try:
            _unroute(engine, rebalance, pending)
        except StepFailed as error:
            _reroute(engine, rebalance, pending)
            return _failed(rebalance, error)
    for index in range(rebalance.next_move, len(switches)):
        switch = switches[index]
        if several:
            _log(
                rebalance,
                f"Switch {index + 1}/{len(switches)}: {switch['instance']} "
                f"{switch['source_role']} → {switch['target_role']}",
            )
        try:
            _switch_one(engine, rebalance, switch, orphan=claim == "orphan", unrouted=unrouted)
        except StepFailed as error:
            _reroute(engine, rebalance, switches[index + 1 :])
            done = f" ({index} of {len(switches)} switches done and kept)" if several else ""
            with transaction.atomic():
                _finish(
                    rebalance,
                    ok=False,
                    message=f"In-place switch failed ({error.code}): {error.message}{done}",
                )
            return "failed"
        rebalance.next_move = index + 1
        rebalance.save(update_fields=["next_move"])
    seconds = (timezone.now() - rebalance.created).total_seconds()
    last = switches[-1]
    if several:
        text = (
            f"Reached {rebalance.target_prefill}P/{rebalance.target_decode}D by {len(switches)} in-place "
            f"switches ({seconds:.1f} s); the ModelServing still counts each switched pod in its template's "
            "role, and a replaced pod comes back in that role"
        )
    else:
        override = RoleOverride.objects.filter(topology=rebalance.topology, pod=last["instance"]).first()
        template = override.template_role if override else last["target_role"]
        text = (
            f"Resumed routing: {last['instance']} serves {last['target_role']} (in place, {seconds:.1f} s); "
            f"its ModelServing still counts it as {template}, and a replaced pod comes back as {template}"
        )
    with transaction.atomic():
        _finish(rebalance, ok=True, message=text)
    return "succeeded"
