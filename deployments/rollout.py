"""One answer to "what runs, what is wanted, and did the last attempt work" for a topology. Reads only.

Every part of the topology page, the Overview and the API read the desired and running revision from
here, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, TypedDict

from django.db.models import OuterRef, Subquery

from deployments.models import ACTIVE_STATES, Deployment, Kind, State

if TYPE_CHECKING:
    from topologies.models import Topology

PROBLEM_STATES = ("failed", "behind")


class Rollout(TypedDict):
    state: str  # not_deployed | deploying | failed | behind | in_sync
    desired: int | None
    running: int | None
    message: str
    problem: bool


def rollout_of(topology: Topology, last: Deployment | None) -> Rollout:
    """``last``: the topology's newest deployment job other than deletes (None: never attempted)."""
    desired = topology.current_revision.number if topology.current_revision is not None else None
    running = topology.deployed_revision.number if topology.deployed_revision is not None else None
    if last is not None and last.state in ACTIVE_STATES:
        state, message = "deploying", f"{last.describe()} in progress"
    elif (
        last is not None
        and last.state in (State.FAILED, State.ROLLED_BACK)
        and running is not None
        and desired == running
        and last.revision_number != desired
    ):  # the operator kept the running revision: the failed one is no longer wanted
        state = "in_sync"
        message = f"revision {running} is running; {last.describe()} failed and was set aside"
    elif last is not None and last.state in (State.FAILED, State.ROLLED_BACK):
        what = last.describe()
        if running is not None:
            message = f"{what} failed; revision {running} is running"
        else:
            message = f"{what} failed; nothing is running"
        state = "failed"
    elif running is None:
        state, message = "not_deployed", "not deployed"
    elif running != desired:
        state, message = (
            "behind",
            f"running revision {running}, desired revision {desired}: deploy or roll back",
        )
    else:
        state, message = "in_sync", f"revision {running} is running"
    return Rollout(
        state=state, desired=desired, running=running, message=message, problem=state in PROBLEM_STATES
    )


def last_attempts(topology_ids: Iterable[int]) -> dict[int, Deployment]:
    """Each topology's newest non-delete deployment job."""
    out: dict[int, Deployment] = {}
    attempts = Deployment.objects.exclude(kind=Kind.DELETE)
    newest = attempts.filter(topology_id=OuterRef("topology_id")).order_by("-created", "-id").values("id")[:1]
    # A correlated subquery, not DISTINCT ON: standalone mode runs on SQLite.
    rows = attempts.filter(topology_id__in=list(topology_ids), id=Subquery(newest))
    for row in rows:
        if row.topology_id is not None:
            out[row.topology_id] = row
    return out


def topology_rollout(topology: Topology) -> Rollout:
    return rollout_of(topology, last_attempts([topology.pk]).get(topology.pk))


def rollouts(topologies: Iterable[Topology]) -> dict[int, Rollout]:
    items = list(topologies)
    last = last_attempts(t.pk for t in items)
    return {t.pk: rollout_of(t, last.get(t.pk)) for t in items}


def ever_ran(topology: Topology) -> set[int]:
    """Revision numbers that once ran: a deploy, rollback, scale or re-apply of them succeeded."""
    numbers = set(
        Deployment.objects.filter(topology=topology, state=State.SUCCEEDED, revision_number__isnull=False)
        .exclude(kind=Kind.DELETE)
        .values_list("revision_number", flat=True)
    )
    if topology.deployed_revision is not None:
        numbers.add(topology.deployed_revision.number)
    return {n for n in numbers if n is not None}
