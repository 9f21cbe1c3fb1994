"""Staging a move, pure: with in-place switches the donors of the move the demand predicts leave routing
at the breach's first interval, and the move follows once the breach is sustained; a breach that does
not hold routes them again; without in-place switches nothing is staged; a larger predicted move stages
more; nothing is staged while a move is running."""

from __future__ import annotations

from rebalancing.policy import Limits, Observation, Params, State, decide

LIMITS = Limits(prefill_min=1, prefill_max=7, decode_min=1, decode_max=7, budget=8)
PARAMS = Params(breach_intervals=3, cooldown_seconds=30)
MEASURED = State(
    prefill_capacity_tps=12500.0,
    decode_capacity_tps=2240.0,
    prefill_capacity_measured=True,
    decode_capacity_measured=True,
)


def shift(ts: float, waiting: float, routed_prefill: int = 6, **kw: object) -> Observation:
    """6P/2D just after a RAG → chat shift: the decodes generate at their limit and a queue builds in
    front of them; the prefills have far more than the chat prompts need."""
    values: dict[str, object] = dict(
        prefill=6,
        decode=2,
        ttft_p95_ms=600.0,
        tbt_p95_ms=28.0,
        prefill_waiting=0.0,
        decode_waiting=waiting,
        prompt_tps=37000.0,
        prefill_hit_rate=0.5,
        prefill_requests_ps=38.0,
        gen_tps=4480.0,
        decode_requests_ps=15.0,
        prefill_ready=routed_prefill,
        decode_ready=2,
        in_place=True,
    )
    values.update(kw)
    return Observation(ts=ts, ttft_target_ms=1500.0, tbt_target_ms=50.0, **values)  # type: ignore[arg-type]


def test_the_donors_leave_routing_at_the_first_interval_and_the_move_follows_once_sustained():
    state = MEASURED
    first, state = decide(shift(5.0, 120), PARAMS, LIMITS, state)
    assert (first.rule, first.action, first.prefill, first.decode) == ("stage", "stage_decode", 2, 6)
    assert not first.acts and first.prepares
    assert first.explanation.startswith("4 prefill out of routing ahead of a move to 2P/6D")
    assert "(1 of 3 intervals; they serve prefill again if it is not)" in first.explanation
    assert state.staged_role == "decode" and (state.staged_prefill, state.staged_decode) == (2, 6)

    second, state = decide(shift(10.0, 240, routed_prefill=2), PARAMS, LIMITS, state)
    assert (second.rule, second.action) == ("staged", "hold"), second.explanation
    assert second.explanation.endswith("4 prefill staged, draining")

    third, state = decide(shift(15.0, 360, routed_prefill=2), PARAMS, LIMITS, state)
    assert third.acts and third.action == "move_to_decode", third.explanation
    assert (third.prefill, third.decode) == (2, 6)
    assert "4 prefill staged 10 s ago" in third.explanation
    assert state.staged_role == ""


def test_a_breach_that_does_not_hold_routes_the_staged_instances_again():
    state = MEASURED
    _, state = decide(shift(5.0, 120), PARAMS, LIMITS, state)
    calm, state = decide(shift(10.0, 0, routed_prefill=2), PARAMS, LIMITS, state)
    assert (calm.rule, calm.action, calm.prefill, calm.decode) == ("unstage", "unstage", 6, 2)
    assert calm.prepares and not calm.acts
    assert "the staged move to 2P/6D is dropped: routing to the 4 staged prefill again" in calm.explanation
    assert state.staged_role == "" and state.staged_ts is None


def test_nothing_is_staged_without_in_place_switches_or_while_a_move_runs():
    verdict, state = decide(shift(5.0, 120, in_place=False), PARAMS, LIMITS, MEASURED)
    assert verdict.rule == "breach_pending" and state.staged_role == ""
    verdict, state = decide(shift(5.0, 120, busy="a move is in progress"), PARAMS, LIMITS, MEASURED)
    assert verdict.rule == "busy" and state.staged_role == ""


def test_a_larger_predicted_move_stages_more_donors_and_a_deploy_drops_the_stage():
    state = MEASURED
    # A first interval that shows only part of the step: one prefill is enough to stage.
    small, state = decide(shift(5.0, 10, gen_tps=4480.0), PARAMS, LIMITS, state)
    assert small.action == "stage_decode" and (small.prefill, small.decode) < (6, 2)
    staged = (small.prefill, small.decode)
    larger, state = decide(shift(10.0, 400, routed_prefill=small.prefill), PARAMS, LIMITS, state)
    assert larger.action == "stage_decode" and larger.decode > staged[1], larger.explanation
    assert state.staged_ts == 5.0  # staged since the first interval
    deploying = shift(15.0, 600, busy="deployment #4 (scale) is in progress")
    dropped, state = decide(deploying, PARAMS, LIMITS, state)
    assert dropped.action == "unstage" and "no move while deployment #4" in dropped.explanation
    assert state.staged_role == ""
