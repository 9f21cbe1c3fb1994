"""Staging a move ahead of its confirmation (PURE): with in-place switches, the donors of the move the
demand predicts leave routing at the breach's first interval, so they drain while the breach is
confirmed; ``rebalancing.policy.decide`` calls ``ahead`` and ``follow``.

A switch cannot start before its donor has drained, and a prefill drains only once every decode has
admitted the requests whose KV it holds: right after a mix shift that is the whole queue in front of
the decodes, tens of seconds. Staging overlaps that wait with the ``breach_intervals`` the planner
waits anyway. It adds no capacity before the breach is sustained (the rule stands); it only stops
sending new requests to instances the donor role can spare, by the same checks a move makes (the
donor's remaining instances at most at ``headroom`` of their measured capacity, no queue on them).
If the breach does not hold, the staged instances are routed again and nothing else changed.
"""

from __future__ import annotations

from dataclasses import replace

from rebalancing import demand, demand_rules
from rebalancing.inputs import OTHER, Limits, Observation, Params, State
from rebalancing.verdicts import Verdict, hold


def cleared(state: State) -> State:
    return replace(state, staged_role="", staged_prefill=0, staged_decode=0, staged_ts=None)


def _count(prefill: int, decode: int, role: str) -> int:
    return prefill if role == "prefill" else decode


def ahead(
    obs: Observation,
    params: Params,
    limits: Limits,
    state: State,
    load: demand.Demand,
    needed: dict[str, int],
) -> tuple[Verdict, State] | None:
    """A staged move for a breach one role has held for fewer than its needed intervals, or a larger one
    than the move staged already (None: nothing to stage: not in place, both or neither role breached,
    the demand predicts no move, or none larger than the staged one)."""
    if not (params.stage_ahead and params.demand_split and obs.in_place):
        return None
    streaks = {"prefill": state.ttft_streak, "decode": state.tbt_streak}
    on = [role for role, streak in streaks.items() if streak]
    if len(on) != 1:
        return None
    role = on[0]
    streak = streaks[role]
    if streak >= needed[role]:
        return None
    predicted = demand_rules.demand_move(obs, role, streak, params, limits, load)
    if predicted is None:
        return None
    donor = OTHER[role]
    moving = _count(obs.prefill, obs.decode, donor) - _count(predicted.prefill, predicted.decode, donor)
    if state.staged_role:
        already = _count(obs.prefill, obs.decode, donor) - _count(
            state.staged_prefill, state.staged_decode, donor
        )
        if state.staged_role != role or moving <= already:
            return None
    text = (
        f"{moving} {donor} out of routing ahead of a move to {predicted.prefill}P/{predicted.decode}D, "
        f"draining while the breach is confirmed ({streak} of {needed[role]} intervals; they serve {donor} "
        f"again if it is not): {predicted.explanation}"
    )
    staged = replace(
        state,
        staged_role=role,
        staged_prefill=predicted.prefill,
        staged_decode=predicted.decode,
        staged_ts=state.staged_ts if state.staged_role else obs.ts,
    )
    return Verdict("stage", f"stage_{role}", predicted.prefill, predicted.decode, text), staged


def follow(obs: Observation, state: State, verdict: Verdict) -> tuple[Verdict, State]:
    """With a move staged, this interval's ``verdict`` (judged as if nothing were staged) stands when it
    moves toward the staged role at the budget (the breach is sustained; its donors are the staged ones
    first, more or fewer as the demand is now); it becomes a hold while the breach builds; anything else
    routes the staged instances again."""
    role = state.staged_role
    donor = OTHER[role]
    target = (state.staged_prefill, state.staged_decode)
    moving = _count(obs.prefill, obs.decode, donor) - _count(*target, donor)
    age = obs.ts - (state.staged_ts if state.staged_ts is not None else obs.ts)
    if verdict.acts and verdict.action == f"move_to_{role}":
        # The move as judged now (the demand may have grown since): the staged donors go first.
        return (
            replace(
                verdict,
                explanation=f"{verdict.explanation} ({moving} {donor} staged {age:.0f} s ago, toward "
                f"{target[0]}P/{target[1]}D)",
            ),
            cleared(state),
        )
    streak = state.ttft_streak if role == "prefill" else state.tbt_streak
    if verdict.rule == "breach_pending" and streak:
        return hold(obs, "staged", f"{verdict.explanation}; {moving} {donor} staged, draining"), state
    return (
        Verdict(
            "unstage",
            "unstage",
            obs.prefill,
            obs.decode,
            f"{verdict.explanation}; the staged move to {target[0]}P/{target[1]}D is dropped: routing to "
            f"the {moving} staged {donor} again",
        ),
        cleared(state),
    )
