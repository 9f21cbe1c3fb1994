"""Planning a ratio change as one-at-a-time moves (PURE).

A move changes one role's replicas by one and is executed as one deployments scale job. The order
keeps the topology serving and within its accelerator budget at every step: while adding fits the
budget, the role that grows gains an instance first (the new instance is Ready before the other
role loses one); at the budget the shrinking role gives one up first. No role ever drops below one
instance mid-plan, so requests keep a prefill and a decode to go to.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from rebalancing.policy import Limits, split_problem


@dataclass(frozen=True)
class Move:
    role: str
    replicas: int  # the role's replicas after this move

    def as_dict(self) -> dict[str, object]:
        return {"role": self.role, "replicas": self.replicas}


def plan_moves(
    prefill: int, decode: int, target_prefill: int, target_decode: int, limits: Limits
) -> list[Move]:
    """Moves from (prefill, decode) to the target; each intermediate split respects the budget."""
    moves: list[Move] = []
    p, d = prefill, decode
    guard = 0
    while (p, d) != (target_prefill, target_decode):
        guard += 1
        if guard > 1000:
            raise ValueError("no move sequence reaches the target")
        grow = [
            r for r, cur, tgt in (("prefill", p, target_prefill), ("decode", d, target_decode)) if cur < tgt
        ]
        shrink = [
            r for r, cur, tgt in (("prefill", p, target_prefill), ("decode", d, target_decode)) if cur > tgt
        ]
        step: tuple[int, int] | None = None
        if grow:
            role = grow[0]
            candidate = (p + 1, d) if role == "prefill" else (p, d + 1)
            if limits.cost(*candidate) <= limits.budget:
                step = candidate
        if step is None and shrink:
            role = shrink[0]
            candidate = (p - 1, d) if role == "prefill" else (p, d - 1)
            if min(candidate) >= 1 or (candidate[0] >= target_prefill and candidate[1] >= target_decode):
                step = candidate
        if step is None:
            raise ValueError("no move keeps the topology within its budget and serving")
        role = "prefill" if step[0] != p else "decode"
        p, d = step
        moves.append(Move(role, p if role == "prefill" else d))
    return moves


def target_problems(
    prefill: int, decode: int, target_prefill: int, target_decode: int, limits: Limits
) -> dict[str, list[str]]:
    """Why a requested split is refused, by field ({} when it is allowed)."""
    problems: dict[str, list[str]] = {}
    for role, value in (("prefill", target_prefill), ("decode", target_decode)):
        lo, hi = limits.bounds(role)
        if value < max(1, lo) or value > hi:
            problems[role] = [
                f"{value} is outside the rebalancing bounds {max(1, lo)}..{hi}; "
                f"choose within them or change rebalancing.{role}.min/max in the topology"
            ]
    if problems:
        return problems
    problem = split_problem(limits, target_prefill, target_decode)
    if problem:
        key = "decode" if "ratio" in problem else "prefill"
        problems[key] = [f"{problem}; choose another split or change the topology's rebalancing settings"]
        return problems
    if (prefill, decode) == (target_prefill, target_decode):
        problems["prefill"] = [f"the topology already runs {prefill}P/{decode}D; choose a different split"]
    return problems


def plan_switches(
    pods: dict[str, tuple[str, str]],
    target_prefill: int,
    target_decode: int,
    first: Collection[str] = (),
) -> list[dict[str, str]]:
    """In-place switches from the split the pods serve to the target (same total), one instance at a
    time. ``pods``: name → (role it serves, its template's role); pods out of routing are not moved.
    The pods in ``first`` (staged: already out of routing and drained) go first; then an instance
    serving another role than its template's (fewer overrides); then the highest-named, the one its
    orchestrator would remove last in a scale-down anyway."""
    serving = {
        role: sorted((n for n, (s, _) in pods.items() if s == role), reverse=True)
        for role in ("prefill", "decode")
    }
    away = sorted(n for n, (s, _) in pods.items() if s not in serving)
    if away:
        raise ValueError(f"{', '.join(away)} is out of routing")
    if len(serving["prefill"]) + len(serving["decode"]) != target_prefill + target_decode:
        raise ValueError("an in-place ratio change keeps the number of instances")
    gain = target_prefill - len(serving["prefill"])
    source, target = ("decode", "prefill") if gain > 0 else ("prefill", "decode")
    # stable: keeps name order
    candidates = sorted(serving[source], key=lambda n: (n not in first, pods[n][1] != target))
    if abs(gain) >= len(candidates):
        raise ValueError(f"the target leaves no {source} instance")
    return [
        {"instance": name, "source_role": source, "target_role": target} for name in candidates[: abs(gain)]
    ]
