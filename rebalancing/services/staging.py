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
from kube.labels import NOT_SERVING, ROLE, SERVING_ROLE, STAGED, STAGED_BY_PLANNER
from rebalancing.models import STAGED_STATE_KEY, RoleOverride
from rebalancing.moves import plan_switches
from rebalancing.services.engine_steps import Engine, StepFailed
from rebalancing.switching import in_place_problem, role_pods, serving_roles

logger = logging.getLogger(__name__)

STATE_KEY = STAGED_STATE_KEY
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
            engine.relabel(name, NOT_SERVING, staged=True)
        except StepFailed as error:
            stage_release(topology=topology, staged={k: v for k, v in now.items() if k not in staged})
            raise DomainError(f"cannot stage the move: {error.message}", code=error.code) from None
        now[name] = switch["source_role"]
    return now


def _served_now(topology: Any, staged: dict[str, str], pods: list[Any] | None = None) -> dict[str, str]:
    """The role each staged pod is to be routed as: its override's after an in-place switch, else its
    template's, as the pods stand now (an engine restart while staged ends the override: the pod serves
    its template's role again). A pod that is gone is left out; the staged role when the cluster cannot
    be asked. ``pods``: the topology's pods when the caller has just listed them."""
    if pods is None:
        try:
            pods = role_pods(topology)
        except (DomainError, ValueError):
            return staged
    by_name = {p.name: p for p in pods}
    overrides = {o.pod: o.serving_role for o in RoleOverride.objects.filter(topology=topology)}
    return {name: overrides.get(name, by_name[name].labels[ROLE]) for name in staged if name in by_name}


def stage_release(*, topology: Any, staged: dict[str, str]) -> list[str]:
    """Route staged pods again as the role they serve (``_served_now``); returns the pods routed (a pod
    that is gone needs nothing: its replacement starts routed; one that cannot be relabelled is logged
    and left to ``stage_release_left``'s caller or the sweep)."""
    return list(_release(topology, staged)[0])


def stage_release_left(*, topology: Any, staged: dict[str, str]) -> dict[str, str]:
    """``stage_release``, returning the staged pods still out of routing (those it could not relabel)."""
    return _release(topology, staged)[1]


def _release(
    topology: Any, staged: dict[str, str], pods: list[Any] | None = None
) -> tuple[dict[str, str], dict[str, str]]:
    """(the pods routed again, by the role they were routed as; those that could not be relabelled)."""
    if not staged:
        return {}, {}
    engine = Engine(topology)
    routed, left = {}, {}
    for name, role in _served_now(topology, staged, pods).items():
        try:
            engine.relabel(name, role)
        except StepFailed as error:
            logger.warning("staged pod %s not routed again: %s", name, error.message)
            left[name] = staged[name]
            continue
        routed[name] = role
    return routed, left


def sweep_due(state: dict[str, Any] | None, now: float) -> bool:
    """Whether the planner should look for pods left out of routing (``unrouted_sweep``) at ``now``."""
    last = (state or {}).get(SWEPT_KEY)
    return not isinstance(last, (int, float)) or now - float(last) >= SWEEP_SECONDS


def unrouted_sweep(*, topology: Any, staged: dict[str, str]) -> list[str]:
    """Route again the pods the planner took out of routing for a staging that no longer holds them (its
    interval failed to record after the relabel, or a release could not relabel them): serving role
    ``none`` with the planner's staged mark, not in ``staged``. Each is routed as the role it serves
    (``_served_now``). A pod out of routing without the mark is left alone: a switch whose restore failed
    leaves its pod so on purpose. Returns the pods routed; a cluster that cannot be asked is left for the
    next sweep."""
    try:
        pods = role_pods(topology)
    except (DomainError, ValueError):
        return []
    orphans = {
        p.name: p.labels[ROLE]
        for p in pods
        if p.labels.get(SERVING_ROLE) == NOT_SERVING
        and p.labels.get(STAGED) == STAGED_BY_PLANNER
        and p.name not in staged
    }
    if not orphans:
        return []
    routed, _ = _release(topology, orphans, pods)
    for name, role in routed.items():
        text = (
            f"{name} was out of routing for a staged move that no longer holds it (a planner interval "
            f"that failed after taking it out leaves it so): routed again as {role}"
        )
        logger.warning(text)
        audit_record(
            action="rebalancing.unrouted_pod_routed",
            target=topology,
            actor_label="planner",
            detail={"pod": name, "role": role, "text": text},
        )
    return list(routed)
