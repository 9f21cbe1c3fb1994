"""Writes: the role overrides that in-place switches leave (``RoleOverride``), kept true to the pods.

An override ends when its pod is gone, serves its template's role again (a replaced pod starts in it), or
its engine restarted since the switch: a restarted MindIE or SGLang reads its role from its rendered
config or arguments, i.e. its template's, while the pod still carries the serving-role label of the
switch. Tandem then routes the pod by its template's role again (relabels it) and records that. A pod that
is only briefly unready keeps its override: its engine still serves the switched role."""

from __future__ import annotations

import logging
from typing import Any

from audit.services import audit_record
from rebalancing.inplace import Instance
from rebalancing.models import RoleOverride
from rebalancing.services.engine_steps import Engine, StepFailed

logger = logging.getLogger(__name__)


def overrides_prune(*, topology: Any, instances: dict[str, Instance]) -> list[RoleOverride]:
    """Drop overrides whose pod is gone or serves its template's role again; return those whose pod's
    engine restarted since the switch (the caller routes them by their template's role again).
    ``instances``: the topology's pods, Ready or not."""
    restarted = []
    for override in RoleOverride.objects.filter(topology=topology):
        inst = instances.get(override.pod)
        if inst is None or inst.serving == inst.template:
            override.delete()
        elif inst.restarts > override.restarts:
            restarted.append(override)
    return restarted


def overrides_end_restarted(*, engine: Engine, topology: Any, restarted: list[RoleOverride]) -> None:
    """Route each restarted pod by its template's role again and end its override (a relabel that fails
    keeps the override: the next refresh tries again)."""
    for override in restarted:
        try:
            engine.relabel(override.pod, override.template_role)
        except StepFailed as error:
            logger.warning("override of %s kept: %s", override.pod, error.message)
            continue
        override.delete()
        text = (
            f"{override.pod} restarted after its switch to {override.serving_role}: its engine serves its "
            f"template's role {override.template_role} again, so it is routed as {override.template_role}"
        )
        logger.warning(text)
        audit_record(
            action="rebalancing.override_ended",
            target=topology,
            detail={"pod": override.pod, "role": override.template_role, "text": text},
        )


def overrides_refresh(*, topology: Any) -> None:
    """Keep the topology's overrides true to its pods, Ready or not (asks the cluster only when there are
    overrides; a cluster that cannot be asked leaves them as they are)."""
    if not RoleOverride.objects.filter(topology=topology).exists():
        return
    engine = Engine(topology)
    try:
        found = engine.instances(ready_only=False)
    except StepFailed:
        return
    restarted = overrides_prune(topology=topology, instances=found)
    overrides_end_restarted(engine=engine, topology=topology, restarted=restarted)
