"""Reads for rollbacks: which revisions are safe to return to, and what returning to one would change.

A revision is *known good* when a deploy, rollback, scale or re-apply of it once succeeded. The default
target is the newest known-good revision other than the running one; a failed or never-deployed
revision is a target only when chosen explicitly, with a confirmation naming what it deploys.
A revision that changes only replica counts (a scale, a ratio change, a planner move) is a *ratio*
revision: the choices fold each run of them into its newest known-good one, so ratio moves do not
flood the list, and a rollback that changes the ratio says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from deployments.models import Deployment, Kind, State
from deployments.rollout import ever_ran

if TYPE_CHECKING:
    from topologies.models import Revision, Topology

ROLES = ("prefill", "decode")
MAX_DIFFERENCES = 8


def _without_replicas(spec: dict[str, Any]) -> dict[str, Any]:
    roles = {
        name: {k: v for k, v in (role or {}).items() if k != "replicas"}
        for name, role in (spec.get("roles") or {}).items()
    }
    return {**spec, "roles": roles}


def replicas_of(spec: dict[str, Any]) -> tuple[int, int]:
    roles = spec.get("roles") or {}
    return tuple(int((roles.get(r) or {}).get("replicas") or 0) for r in ROLES)  # type: ignore[return-value]


def ratio_text(spec: dict[str, Any]) -> str:
    prefill, decode = replicas_of(spec)
    return f"{prefill}P/{decode}D"


def is_ratio_only(previous: dict[str, Any] | None, spec: dict[str, Any]) -> bool:
    """True when ``spec`` differs from ``previous`` in replica counts alone (pure)."""
    return (
        previous is not None and previous != spec and _without_replicas(previous) == _without_replicas(spec)
    )


def ratio_only_flags(revisions: list[Any]) -> dict[int, bool]:
    """Revision number → whether it changed replica counts only against the one before (``revisions`` in
    ascending order; pure)."""
    flags: dict[int, bool] = {}
    previous: dict[str, Any] | None = None
    for revision in revisions:
        flags[revision.number] = is_ratio_only(previous, dict(revision.spec))
        previous = dict(revision.spec)
    return flags


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(_flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def _short(value: Any) -> str:
    text = "unset" if value is None or value == "" else str(value)
    return text if len(text) <= 80 else text[:77] + "…"


def spec_differences(running: dict[str, Any], target: dict[str, Any]) -> list[str]:
    """What deploying ``target`` changes against ``running``, in words; the ratio first (pure)."""
    lines: list[str] = []
    if replicas_of(running) != replicas_of(target):
        lines.append(
            f"P:D ratio {ratio_text(running)} → {ratio_text(target)}: this undoes the ratio change made "
            "since (scale or rebalancing)"
        )
    before, after = _flatten(_without_replicas(running)), _flatten(_without_replicas(target))
    changed = [key for key in sorted(set(before) | set(after)) if before.get(key) != after.get(key)]
    for key in changed[:MAX_DIFFERENCES]:
        lines.append(f"{key}: {_short(before.get(key))} → {_short(after.get(key))}")
    if len(changed) > MAX_DIFFERENCES:
        lines.append(f"and {len(changed) - MAX_DIFFERENCES} more fields")
    return lines


@dataclass(frozen=True)
class Candidate:
    number: int
    image: str
    ratio: str
    known_good: bool
    ratio_only: bool
    outcome: str  # "ran successfully" | "its last deploy failed: …" | "never deployed"
    differences: tuple[str, ...] = ()
    folded: tuple[int, ...] = ()  # ratio revisions this entry stands for

    def as_dict(self) -> dict[str, Any]:
        return {
            "revision": self.number,
            "image": self.image,
            "ratio": self.ratio,
            "known_good": self.known_good,
            "ratio_only": self.ratio_only,
            "outcome": self.outcome,
            "differences": list(self.differences),
            "folded": list(self.folded),
        }


@dataclass(frozen=True)
class RollbackPlan:
    running: int | None
    desired: int | None
    default: int | None  # the newest known-good revision other than the running one
    keep_running: bool  # the desired revision is not the running one: "keep the running revision" applies
    candidates: tuple[Candidate, ...] = field(default_factory=tuple)

    def candidate(self, number: int) -> Candidate | None:
        return next((c for c in self.candidates if c.number == number), None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "running": self.running,
            "desired": self.desired,
            "default": self.default,
            "keep_running": self.keep_running,
            "candidates": [c.as_dict() for c in self.candidates],
        }


def _words(text: str, limit: int = 300) -> str:
    """``text`` cut at a word boundary (never mid-word), with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + "…"


def _outcomes(topology: Topology) -> dict[int, str]:
    """Revision number → why it is not known good, from its newest finished attempt."""
    out: dict[int, str] = {}
    attempts = (
        Deployment.objects.filter(topology=topology, revision_number__isnull=False)
        .exclude(kind=Kind.DELETE)
        .filter(state__in=[State.FAILED, State.ROLLED_BACK])
        .order_by("created", "id")
    )
    for attempt in attempts:
        first = (attempt.diagnosis or [{}])[0].get("message") if attempt.diagnosis else ""
        reason = _words(str(first or attempt.error or "see its diagnosis").split("; rollback")[0])
        out[int(attempt.revision_number or 0)] = f"its last deploy failed: {reason}"
    return out


def failed_revisions(topology: Topology) -> set[int]:
    """Revision numbers with a failed deploy (the revisions list says "deploy failed", not "never
    deployed", for those that never ran successfully)."""
    return set(_outcomes(topology))


def _candidate(
    revision: Revision,
    running_spec: dict[str, Any] | None,
    *,
    good: bool,
    ratio_only: bool,
    outcome: str,
    folded: tuple[int, ...] = (),
) -> Candidate:
    spec = dict(revision.spec)
    return Candidate(
        number=revision.number,
        image=str(spec.get("image", "")),
        ratio=ratio_text(spec),
        known_good=good,
        ratio_only=ratio_only,
        outcome=outcome,
        differences=tuple(spec_differences(running_spec, spec)) if running_spec is not None else (),
        folded=folded,
    )


def rollback_plan(topology: Topology, *, limit: int = 100) -> RollbackPlan:
    """Every revision one may return to, newest first, with what it would change against the running one."""
    revisions = list(topology.revisions.order_by("number")[:1000])[-limit:]
    good = ever_ran(topology)
    failed = _outcomes(topology)
    running_rev = topology.deployed_revision
    running = running_rev.number if running_rev is not None else None
    desired = topology.current_revision.number if topology.current_revision is not None else None
    running_spec = dict(running_rev.spec) if running_rev is not None else None
    ratio_flags = ratio_only_flags(revisions)
    candidates: list[Candidate] = []
    pending_fold: list[int] = []  # newer ratio revisions folded into the next known-good one shown
    for revision in reversed(revisions):
        number = revision.number
        if number == running:
            pending_fold = []
            continue
        ratio_only = ratio_flags[number]
        known = number in good
        outcome = "ran successfully" if known else failed.get(number, "never deployed")
        if ratio_only and not known:
            pending_fold.append(number)  # a failed or unrun ratio move: folded, still reachable by number
            continue
        fold = tuple(pending_fold)
        pending_fold = []
        if ratio_only and candidates and candidates[-1].ratio_only and candidates[-1].known_good:
            # an older ratio move of the same run: the newer one shown stands for it
            last = candidates[-1]
            candidates[-1] = Candidate(**{**last.__dict__, "folded": (*last.folded, number, *fold)})
            continue
        candidates.append(
            _candidate(
                revision, running_spec, good=known, ratio_only=ratio_only, outcome=outcome, folded=fold
            )
        )
    default = next((c.number for c in candidates if c.known_good), None)
    return RollbackPlan(
        running=running,
        desired=desired,
        default=default,
        keep_running=running is not None and desired is not None and desired != running,
        candidates=tuple(candidates),
    )


def candidate_for(topology: Topology, revision: Revision, plan: RollbackPlan) -> Candidate:
    """The plan's entry for ``revision``, or one built for a revision the list folds away."""
    found = plan.candidate(revision.number)
    if found is not None:
        return found
    known = revision.number in ever_ran(topology)
    outcome = "ran successfully" if known else _outcomes(topology).get(revision.number, "never deployed")
    running = topology.deployed_revision
    return _candidate(
        revision,
        dict(running.spec) if running is not None else None,
        good=known,
        ratio_only=False,
        outcome=outcome,
    )


@dataclass(frozen=True)
class RevisionRow:
    revision: Any  # a topologies Revision
    ratio_only: bool
    ratio: str
    folded: bool  # an older ratio change of a run whose newest one is shown


def revision_rows(revisions: list[Any], *, keep: set[int | None]) -> list[RevisionRow]:
    """The revisions list, newest first, with runs of ratio changes folded behind their newest one;
    revisions in ``keep`` (desired, running) are never folded (pure)."""
    ordered = sorted(revisions, key=lambda r: r.number)
    flags = ratio_only_flags(ordered)
    rows: list[RevisionRow] = []
    for revision in reversed(ordered):
        ratio_only = flags[revision.number]
        newer = rows[-1] if rows else None
        folded = ratio_only and revision.number not in keep and newer is not None and newer.ratio_only
        rows.append(RevisionRow(revision, ratio_only, ratio_text(dict(revision.spec)), bool(folded)))
    return rows
