"""Reads: which topology Tandem's gateway sends a shared model name to, and why, in words."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from topologies.models import Topology


def model_name_sharing(topology: Topology) -> dict[str, Any] | None:
    """None when no other topology the gateway knows answers to this topology's model name or aliases."""
    answer = model_name_routing(topology)
    return answer if answer["shared_with"] else None


def model_name_routing(topology: Topology) -> dict[str, Any]:
    """Which topology the gateway sends this topology's model name to, which others claim it, and why."""
    from gateway.routes import name_owners
    from gateway.selectors import route_entries

    entries = route_entries()
    mine = next((e for e in entries if e.topology_id == topology.pk), None)
    names = set(mine.names) if mine is not None else {topology.model_name}
    others = [e for e in entries if e.topology_id != topology.pk and names & set(e.names)]
    owner = name_owners(entries).get(topology.model_name)
    served_here = owner is not None and owner.topology_id == topology.pk
    shared = ", ".join(e.topology_name for e in others)
    model = topology.model_name
    if not others:
        why = (
            f"The gateway sends {model} to this topology; no other topology claims the name."
            if served_here
            else f"No topology serves {model} through the gateway yet: this one does once it is deployed."
        )
    elif served_here:
        why = (
            f"The gateway sends {model} to this topology: it claimed the name first, and the oldest "
            f"topology keeps a name. {shared} get no gateway requests for {model}."
        )
    elif owner is not None:
        why = (
            f"The gateway sends {model} to topology {owner.topology_name}, which claimed the name first; "
            "this topology gets no gateway requests for it. Give it another model name, or an alias in its "
            "gateway settings."
        )
    else:  # only aliases collide
        why = f"An alias of this topology is also a name of {shared}; the oldest topology keeps each name."
    return {
        "model": model,
        "served_here": served_here,
        "served_by_id": owner.topology_id if owner is not None else None,
        "served_by_name": owner.topology_name if owner is not None else None,
        "shared_with": [{"id": e.topology_id, "name": e.topology_name} for e in others],
        "why": why,
    }
