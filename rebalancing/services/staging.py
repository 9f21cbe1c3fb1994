"""Writes: a move staged ahead of its confirmation (``rebalancing.staging`` decides when). The planner takes
the move's donor pods out of routing (serving-role label → ``none``) so they drain while the breach is
confirmed; the move that follows switches them first (``rebalance_ratio_start(staged=…)``), or they are
routed again as the role they served. The staged pods are kept in the planner's state as
``{pod: role it served}``; nothing else about them changes."""

from __future__ import annotations

import logging
from typing import Any

from audit.services import audit_record
from controlplane.api.errors import DomainError
from kube.labels import NOT_SERVING, ROLE, SERVING_ROLE
from rebalancing.models import RoleOverride
from rebalancing.moves import plan_switches
from rebalancing.services.engine_steps import Engine, StepFailed
from rebalancing.switching import in_place_problem, role_pods, serving_roles

logger = logging.getLogger(__name__)

STATE_KEY = "staged_pods"
SWEPT_KEY = "unrouted_swept_at"
# How often a free planner looks for pods left out of routing with no move to follow (one pod list).
SWEEP_SECONDS = 60.0


def staged_pods(state: dict[str, Any] | None) -> dict[str, str]:
    """The pods a planner state holds staged, by the role they served."""
    raw = (state or {}).get(STATE_KEY)
    if not isinstance(raw, dict):
        return {}
    return {str(k): str(v) for k, v in raw.items() if v in ("prefill", "decode")}


def stage_donors(*, topology: Any, target: tuple[int, int], staged: dict[str, str]) -> dict[str, str]:
    """Take the donors of an in-place move to ``target`` out of routing (those not staged yet); returns
    every staged pod. DomainError when the pods cannot be switched in place (nothing is left unrouted)."""
    pods = role_pods(topology)
    problem = in_place_problem(pods)
    if problem:
        raise DomainError(f"cannot stage the move: {problem}", code="redeploy_needed")
    try:
        switches = plan_switches(serving_roles(pods, staged), *target, first=tuple(staged))
    except ValueError as error:
        raise DomainError(f"cannot stage {target[0]}P/{target[1]}D: {error}", code="ratio_refused") from None
    engine = Engine(topology)
    now = dict(staged)
    for switch in switches:
        name = switch["instance"]
        if name in now:
            continue
        try:
            engine.relabel(name, NOT_SERVING)
        except StepFailed as error:
            stage_release(topology=topology, staged={k: v for k, v in now.items() if k not in staged})
            raise DomainError(f"cannot stage the move: {error.message}", code=error.code) from None
        now[name] = switch["source_role"]
    return now


def stage_release(*, topology: Any, staged: dict[str, str]) -> list[str]:
    """Route staged pods as the role they served again; returns the pods routed (a pod that is gone, or
    cannot be relabelled, is logged and left: its replacement starts routed)."""
    if not staged:
        return []
    engine = Engine(topology)
    routed = []
    for name, role in staged.items():
        try:
            engine.relabel(name, role)
        except StepFailed as error:
            logger.warning("staged pod %s not routed again: %s", name, error.message)
            continue
        routed.append(name)
    return routed


def sweep_due(state: dict[str, Any] | None, now: float) -> bool:
    """Whether the planner should look for pods left out of routing (``unrouted_sweep``) at ``now``."""
    last = (state or {}).get(SWEPT_KEY)
    return not isinstance(last, (int, float)) or now - float(last) >= SWEEP_SECONDS


def unrouted_sweep(*, topology: Any, staged: dict[str, str]) -> list[str]:
    """Route again the pods that are out of routing (serving role ``none``) although no move or staging
    holds them: a staging whose planner interval failed to record after the relabel leaves them so. Call
    only while no move is running (a running in-place move has its own pods out of routing). Each is
    routed as the role it served: its override's role after an in-place switch, else its template's.
    Returns the pods routed; a cluster that cannot be asked is left for the next sweep."""
    from rebalancing.switching import role_pods

    try:
        pods = role_pods(topology)
    except DomainError:
        return []
    overrides = {o.pod: o.serving_role for o in RoleOverride.objects.filter(topology=topology)}
    orphans = {
        p.name: overrides.get(p.name, p.labels[ROLE])
        for p in pods
        if p.labels.get(SERVING_ROLE) == NOT_SERVING and p.name not in staged
    }
    routed = stage_release(topology=topology, staged=orphans)
    for name in routed:
        text = (
            f"{name} was out of routing with no move or staging holding it (a planner interval that "
            f"failed after taking it out leaves it so): routed again as {orphans[name]}"
        )
        logger.warning(text)
        audit_record(
            action="rebalancing.unrouted_pod_routed",
            target=topology,
            actor_label="planner",
            detail={"pod": name, "role": orphans[name], "text": text},
        )
    return routed
