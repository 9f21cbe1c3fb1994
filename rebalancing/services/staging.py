"""Writes: a move staged ahead of its confirmation (``rebalancing.staging`` decides when). The planner takes
the move's donor pods out of routing (serving-role label → ``none``) so they drain while the breach is
confirmed; the move that follows switches them first (``rebalance_ratio_start(staged=…)``), or they are
routed again as the role they served. The staged pods are kept in the planner's state as
``{pod: role it served}``; nothing else about them changes."""

from __future__ import annotations

import logging
from typing import Any

from controlplane.api.errors import DomainError
from kube.labels import NOT_SERVING
from rebalancing.moves import plan_switches
from rebalancing.services.engine_steps import Engine, StepFailed
from rebalancing.switching import in_place_problem, role_pods, serving_roles

logger = logging.getLogger(__name__)

STATE_KEY = "staged_pods"


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
