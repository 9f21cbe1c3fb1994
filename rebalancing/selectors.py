"""Reads: the planner's view of a topology (limits, observation), decisions, rebalances, the panel."""

from __future__ import annotations

import time
from dataclasses import fields
from typing import Any

from django.db.models import QuerySet
from django.urls import reverse

from rebalancing.models import (
    STAGED_STATE_KEY,
    Decision,
    PlannerConfig,
    PlannerMode,
    Rebalance,
    RebalanceState,
    RoleOverride,
)
from rebalancing.observe import observation_from_snapshot
from rebalancing.policy import Limits, Observation, Params
from rebalancing.switching import switch_path


def role_replicas(spec: dict[str, Any]) -> tuple[int, int]:
    roles = spec.get("roles") or {}
    return int((roles.get("prefill") or {}).get("replicas", 0)), int(
        (roles.get("decode") or {}).get("replicas", 0)
    )


def override_list(*, topology: Any) -> QuerySet[RoleOverride]:
    return RoleOverride.objects.filter(topology=topology)


def override_delta(topology: Any) -> tuple[int, int]:
    """How in-place switches move the split away from the spec's: (prefill, decode) instances."""
    prefill = decode = 0
    for override in override_list(topology=topology):
        if override.template_role == override.serving_role:
            continue
        step = 1 if override.serving_role == "prefill" else -1
        prefill, decode = prefill + step, decode - step
    return prefill, decode


def effective_replicas(topology: Any) -> tuple[int, int]:
    """The split the topology serves with: the spec's replicas per role, moved by in-place switches
    (the orchestrator still counts a switched pod in its template's role)."""
    prefill, decode = role_replicas(topology.spec)
    dp, dd = override_delta(topology)
    return prefill + dp, decode + dd


def planner_config(topology: Any) -> PlannerConfig:
    """The topology's planner settings (an unsaved default, mode off, when none were set)."""
    found = PlannerConfig.objects.filter(topology=topology).first()
    return found or PlannerConfig(topology=topology, mode=PlannerMode.OFF)


def planner_params(config: PlannerConfig) -> Params:
    known = {f.name: f.type for f in fields(Params)}
    overrides = {k: v for k, v in (config.params or {}).items() if k in known}
    return Params(**overrides)


def topology_limits(topology: Any, config: PlannerConfig | None = None) -> Limits:
    spec = topology.spec
    roles = spec.get("roles") or {}
    rebalancing = spec.get("rebalancing") or {}
    prefill_bounds = rebalancing.get("prefill") or {}
    decode_bounds = rebalancing.get("decode") or {}
    config = config or planner_config(topology)
    return Limits(
        prefill_min=max(1, int(prefill_bounds.get("min", 1))),
        prefill_max=int(prefill_bounds.get("max", 1)),
        decode_min=max(1, int(decode_bounds.get("min", 1))),
        decode_max=int(decode_bounds.get("max", 1)),
        budget=int(rebalancing.get("accelerator_budget", 0)),
        prefill_accelerators=max(1, int((roles.get("prefill") or {}).get("accelerator_count", 1))),
        decode_accelerators=max(1, int((roles.get("decode") or {}).get("accelerator_count", 1))),
        min_ratio=config.min_ratio,
        max_ratio=config.max_ratio,
    )


def active_rebalance(topology: Any) -> Rebalance | None:
    return Rebalance.objects.filter(topology=topology, state=RebalanceState.RUNNING).first()


def busy_reason(topology: Any) -> str:
    """Why no move may start now ("" when one may)."""
    from deployments.models import ACTIVE_STATES, Deployment

    running = active_rebalance(topology)
    if running is not None:
        return (
            f"rebalance #{running.pk} (to {running.target_prefill}P/{running.target_decode}D) is in progress"
        )
    deployment = Deployment.objects.filter(topology=topology, state__in=ACTIVE_STATES).first()
    if deployment is not None:
        return f"the {deployment.describe()} is in progress"
    if topology.deployed_revision_id is None:
        return "the topology is not deployed"
    return ""


def unset_bounds(topology: Any) -> list[str]:
    """Roles whose rebalancing bounds an import left unset (null; never invented)."""
    rebalancing = (topology.spec or {}).get("rebalancing") or {}
    return [r for r in ("prefill", "decode") if r in rebalancing and not rebalancing[r]]


def unset_reason(topology: Any) -> str:
    """Why the planner waits for the operator ("" when nothing is missing): an imported topology's SLO
    targets and rebalancing bounds stay unset until answered (0 / null; never invented)."""
    targets = (("slo.ttft_ms", topology.slo_ttft_ms), ("slo.tbt_ms", topology.slo_tbt_ms))
    missing = [f for f, v in targets if not v] + [f"rebalancing.{r}" for r in unset_bounds(topology)]
    if not missing:
        return ""
    return f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set (set them in the editor)"


def observation(topology: Any, *, now: float | None = None) -> Observation:
    """What the planner sees now: the latest telemetry snapshot, the desired split, busy state."""
    from telemetry.selectors import latest_snapshot

    prefill, decode = effective_replicas(topology)
    return observation_from_snapshot(
        latest_snapshot(topology_id=topology.pk),
        prefill=prefill,
        decode=decode,
        ttft_target_ms=float(topology.slo_ttft_ms),
        tbt_target_ms=float(topology.slo_tbt_ms),
        busy=busy_reason(topology) or unset_reason(topology),
        now=time.time() if now is None else now,
        in_place=switch_path(topology.engine, topology.kv_connector, topology.backend).name == "in_place",
    )


def decision_list(*, topology: Any) -> QuerySet[Decision]:
    return Decision.objects.filter(topology=topology).select_related("rebalance")


def rebalance_list(*, topology: Any) -> QuerySet[Rebalance]:
    return Rebalance.objects.filter(topology=topology)


def planners_to_tick() -> QuerySet[PlannerConfig]:
    return PlannerConfig.objects.exclude(mode=PlannerMode.OFF).select_related("topology", "topology__cluster")


def planners_off_with_staged_pods() -> QuerySet[PlannerConfig]:
    """Planners turned off while a staged pod could not be routed again (its pods are in the state)."""
    return PlannerConfig.objects.filter(mode=PlannerMode.OFF, state__has_key=STAGED_STATE_KEY)


def unplanned_topologies_with_overrides() -> list[Any]:
    """Topologies whose pods serve out of their template role but whose planner is off (its tick keeps
    their overrides true to the pods otherwise)."""
    from topologies.models import Topology

    planned = PlannerConfig.objects.exclude(mode=PlannerMode.OFF).values("topology_id")
    ids = RoleOverride.objects.exclude(topology_id__in=planned).values("topology_id")
    return list(Topology.objects.filter(pk__in=ids).select_related("cluster"))


def topology_panel_context(topology: Any, request: Any = None) -> dict[str, Any]:
    from accounts.permissions import user_has_role
    from accounts.roles import Role

    config = planner_config(topology)
    prefill, decode = effective_replicas(topology)
    limits = topology_limits(topology, config)
    user = getattr(request, "user", None)
    return {
        "rebalancing": {
            "config": config,
            "params": planner_params(config),
            "limits": limits,
            "prefill": prefill,
            "decode": decode,
            "overrides": list(override_list(topology=topology)),
            "decisions": list(decision_list(topology=topology)[:20]),
            "rebalances": list(rebalance_list(topology=topology)[:5]),
            "active": active_rebalance(topology),
            "can_write": user_has_role(user, Role.OPERATOR),
            "whatif_url": reverse("whatif:page", args=[topology.pk]),
            "modes": PlannerMode.choices,
            "owners_blocking": [o for o in config.other_owners or [] if o.get("blocking")],
            "owners_notes": [o for o in config.other_owners or [] if not o.get("blocking")],
            # the bounds as the hand-over to Kthena writes them (its ratioConstraint's quantities)
            "handoff_ratio": f"{config.min_ratio:g}–{config.max_ratio:g}"
            if config.min_ratio is not None and config.max_ratio is not None
            else "",
        }
    }
