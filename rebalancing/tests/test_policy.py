"""The planner's policy, pure: sustained breaches, opposing moves at the budget, bounds, links, flapping."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rebalancing.moves import plan_moves, plan_switches, target_problems
from rebalancing.policy import Limits, Observation, Params, State, after_move, decide

LIMITS = Limits(prefill_min=1, prefill_max=6, decode_min=1, decode_max=6, budget=8)
PARAMS = Params(breach_intervals=3, cooldown_seconds=30)


def obs(
    ts: float = 0.0, prefill: int = 4, decode: int = 4, ttft: float = 500, tbt: float = 20, **kw
) -> Observation:
    return Observation(
        ts=ts,
        prefill=prefill,
        decode=decode,
        ttft_p95_ms=ttft,
        tbt_p95_ms=tbt,
        ttft_target_ms=1500,
        tbt_target_ms=50,
        **kw,
    )


def run(
    observations: list[Observation],
    limits: Limits = LIMITS,
    params: Params = PARAMS,
    state: State | None = None,
):
    state = state or State()
    verdicts = []
    for o in observations:
        verdict, state = decide(o, params, limits, state)
        verdicts.append(verdict)
    return verdicts, state


def test_a_breach_acts_only_once_sustained_for_the_configured_intervals():
    verdicts, _ = run([obs(ts=5 * i, ttft=2400) for i in range(3)])
    assert [v.action for v in verdicts] == ["hold", "hold", "move_to_prefill"]
    assert verdicts[0].rule == "breach_pending"
    last = verdicts[-1]
    assert (last.prefill, last.decode) == (5, 3)
    assert "TTFT p95 2.40 s > 1.50 s target for 3 intervals" in last.explanation
    assert "decode TBT p95 20 ms < 50 ms target" in last.explanation and "budget full" in last.explanation


def test_below_the_budget_it_adds_instead_of_moving():
    verdicts, _ = run([obs(ts=5 * i, prefill=2, decode=2, tbt=80) for i in range(3)])
    assert verdicts[-1].action == "add_decode" and (verdicts[-1].prefill, verdicts[-1].decode) == (2, 3)


def test_an_opposing_move_needs_the_donor_to_keep_its_slo():
    verdicts, _ = run([obs(ts=5 * i, ttft=2400, tbt=45) for i in range(3)])
    assert verdicts[-1].action == "hold"
    assert "no decode can be spared" in verdicts[-1].explanation


def test_bounds_and_ratio_constraint_refuse_a_move():
    limits = replace(LIMITS, prefill_max=4)
    verdicts, _ = run([obs(ts=5 * i, ttft=2400) for i in range(3)], limits=limits)
    assert verdicts[-1].action == "hold" and "above its maximum of 4" in verdicts[-1].explanation
    limits = replace(LIMITS, max_ratio=1.0)
    verdicts, _ = run([obs(ts=5 * i, ttft=2400) for i in range(3)], limits=limits)
    assert verdicts[-1].action == "hold" and "maxRatio 1" in verdicts[-1].explanation


def test_links_down_holds_and_says_it_is_a_link_problem():
    verdicts, state = run([obs(ts=5 * i, ttft=2400, links_down=["p-0 → d-1"]) for i in range(5)])
    assert {v.action for v in verdicts} == {"hold"} and {v.rule for v in verdicts} == {"links_unhealthy"}
    assert "link problem, not a ratio problem" in verdicts[-1].explanation
    assert state.ttft_streak == 0


def test_no_move_while_busy_or_cooling_down():
    verdicts, _ = run([obs(ts=5 * i, ttft=2400, busy="deployment #3 is in progress") for i in range(4)])
    assert {v.rule for v in verdicts} == {"busy"}
    state = after_move(State(), verdicts[0], ts=0.0, seconds=40.0)
    verdicts, _ = run([obs(ts=5 + 5 * i, ttft=2400) for i in range(5)], state=state)
    assert {v.rule for v in verdicts} == {"cooldown"}  # 40 s move + 2 settle intervals = 50 s


def test_reversing_a_recent_move_needs_twice_the_streak():
    first, _ = run([obs(ts=5 * i, ttft=2400) for i in range(3)])
    state = after_move(State(), first[-1], ts=10.0, seconds=0.0)
    back = [obs(ts=45 + 5 * i, prefill=5, decode=3, tbt=80) for i in range(6)]
    verdicts, _ = run(back, state=state)
    assert [v.action for v in verdicts[:5]] == ["hold"] * 5
    assert verdicts[5].action == "move_to_decode"


def test_no_data_and_steady():
    verdicts, _ = run([obs(ttft=None, tbt=None)])  # type: ignore[arg-type]
    assert verdicts[0].rule == "no_data"
    verdicts, _ = run([obs(ts=5 * i) for i in range(30)])
    assert {v.action for v in verdicts} == {"hold"} and verdicts[-1].rule == "steady"


def test_both_breached_at_full_budget_asks_for_more_accelerators():
    verdicts, _ = run([obs(ts=5 * i, ttft=2400, tbt=80) for i in range(3)])
    assert verdicts[-1].rule == "both_breached" and "more accelerators" in verdicts[-1].explanation


def test_moves_add_first_while_the_budget_allows_and_remove_first_at_the_budget():
    assert [(m.role, m.replicas) for m in plan_moves(1, 1, 2, 3, LIMITS)] == [
        ("prefill", 2),
        ("decode", 2),
        ("decode", 3),
    ]
    assert [(m.role, m.replicas) for m in plan_moves(4, 4, 6, 2, LIMITS)] == [
        ("decode", 3),
        ("prefill", 5),
        ("decode", 2),
        ("prefill", 6),
    ]
    for move in plan_moves(4, 4, 6, 2, LIMITS):
        assert move.replicas >= 1


def test_target_problems_name_the_field_and_the_fix():
    assert "outside the rebalancing bounds" in target_problems(4, 4, 7, 1, LIMITS)["prefill"][0]
    assert "over the budget of 8" in target_problems(4, 4, 5, 5, LIMITS)["prefill"][0]
    assert "already runs" in target_problems(4, 4, 4, 4, LIMITS)["prefill"][0]
    assert target_problems(4, 4, 5, 3, LIMITS) == {}


def test_a_ttft_breach_from_requests_queued_before_decode_grows_decode():
    verdicts, _ = run(
        [obs(ts=5 * i, prefill=2, decode=2, ttft=2400, tbt=20, decode_waiting=30) for i in range(3)]
    )
    assert verdicts[-1].action == "add_decode", verdicts[-1]
    assert "30 requests waiting on 2 decode" in verdicts[-1].explanation


def test_the_prefill_donor_is_judged_by_its_own_share_of_ttft():
    # End-to-end TTFT is high because decode queues; prefill's own part is small, so it can give one up.
    observations = [
        obs(ts=5 * i, prefill=5, decode=3, ttft=2400, tbt=70, decode_waiting=40, prefill_ttft_p95_ms=200)
        for i in range(3)
    ]
    verdicts, _ = run(observations)
    assert verdicts[-1].action == "move_to_decode", verdicts[-1]
    assert "prefill TTFT p95 200 ms < 1.50 s target" in verdicts[-1].explanation


# --- the predictive split (rebalancing.demand) ------------------------------------------------------
def rag_obs(ts: float, **kw) -> Observation:
    """8k-token prompts queue on 3 prefill, each computing 12.5k tokens/s; decode idles."""
    values = dict(
        prefill=3,
        decode=5,
        ttft=3100,
        tbt=18,
        prefill_waiting=20,
        prompt_tps=37500,
        prefill_hit_rate=0.0,
        prefill_requests_ps=37500 / 8000,
        gen_tps=1200,
        decode_requests_ps=6.0,
        decode_waiting=0,
    )
    values.update(kw)
    return obs(ts=ts, **values)  # type: ignore[arg-type]


def test_capacity_is_learned_only_as_a_lower_bound_without_a_queue():
    from rebalancing.demand import learn

    quiet = learn(rag_obs(0, prefill_waiting=0, ttft=400, prompt_tps=30000), State())
    assert quiet.prefill_capacity_tps == 10000  # 30k over 3 ready prefill: at least that much
    lighter = learn(rag_obs(5, prefill_waiting=0, ttft=400, prompt_tps=15000), quiet)
    assert lighter.prefill_capacity_tps == 10000  # light load never lowers it
    busy = learn(rag_obs(10), lighter)  # queued: the instances run at full speed (12.5k each)
    assert busy.prefill_capacity_tps == 12500
    slower = learn(rag_obs(15, prompt_tps=30000), busy)  # at full speed, slower: it decays toward it
    assert slower.prefill_capacity_tps == 12500 * 0.97
    cached = learn(rag_obs(0, prefill_hit_rate=0.5), State())
    assert cached.prefill_capacity_tps == 6250  # prefix-cache hits are not computed
    assert learn(rag_obs(0, busy="a move is in progress"), State()) == State()


def test_a_sustained_prompt_breach_moves_straight_to_the_split_the_demand_needs():
    limits = Limits(prefill_min=1, prefill_max=7, decode_min=1, decode_max=7, budget=8)
    state = State(prefill_capacity_tps=12500, decode_capacity_tps=2200)
    verdicts, _ = run([rag_obs(5 * i) for i in range(3)], limits=limits, state=state)
    assert [v.action for v in verdicts[:2]] == ["hold", "hold"]  # sustained first
    last = verdicts[-1]
    assert last.rule == "demand_split" and last.action == "move_to_prefill"
    # Served 37.5k tok/s; the 20 × 8k queued arrived over the 3 intervals (+10.7k tok/s) and clearing
    # them within 30 s adds 5.3k: 53.5k tok/s, which 5 prefill would run at 86 %, 6 at 71 %.
    assert (last.prefill, last.decode) == (6, 2), last.explanation
    assert "3 decode → prefill (3P/5D → 6P/2D)" in last.explanation
    assert "TTFT p95 3.10 s" in last.explanation and "for 3 intervals" in last.explanation
    assert "prompt demand 53.5k tok/s uncached ≈ 4.3 prefill at 12.5k tok/s each" in last.explanation
    assert "prefill would run at 71%, decode at 27% (≤ 80%), budget full" in last.explanation


def test_the_predictive_move_keeps_the_donor_within_headroom_and_the_bounds():
    limits = Limits(prefill_min=1, prefill_max=4, decode_min=1, decode_max=7, budget=8)
    state = State(prefill_capacity_tps=12500, decode_capacity_tps=2200)
    verdicts, _ = run([rag_obs(5 * i) for i in range(3)], limits=limits, state=state)
    assert (verdicts[-1].prefill, verdicts[-1].decode) == (4, 4)  # prefill_max 4: as far as allowed
    # Generation needs 5k tok/s: 2 decode at 2.2k tok/s would run at 114 %, so the move stops at 3 (76 %).
    verdicts, _ = run([rag_obs(5 * i, gen_tps=5000) for i in range(3)], state=state)
    assert verdicts[-1].rule == "demand_split" and (verdicts[-1].prefill, verdicts[-1].decode) == (5, 3)
    assert "decode at 76% (≤ 80%)" in verdicts[-1].explanation


def test_without_a_capacity_estimate_the_one_instance_rule_decides():
    verdicts, _ = run([rag_obs(5 * i) for i in range(3)], state=State())
    # The first interval already teaches a lower bound for both roles, which is conservative: decode
    # looks fully used at 5 instances, so no predictive move; the one-instance rule moves one.
    assert verdicts[-1].rule == "ttft_breach" and (verdicts[-1].prefill, verdicts[-1].decode) == (4, 4)


def test_steady_load_with_known_capacity_does_not_move():
    state = State(prefill_capacity_tps=12500, decode_capacity_tps=2200)
    steady = [rag_obs(5 * i, ttft=700, prefill_waiting=0, prompt_tps=30000) for i in range(30)]
    verdicts, _ = run(steady, state=state)
    assert {v.action for v in verdicts} == {"hold"} and verdicts[-1].rule == "steady"


def test_learned_capacities_survive_the_stored_state():
    state = State(prefill_capacity_tps=12500.0, decode_capacity_tps=None)
    again = State.from_dict(state.as_dict())
    assert again == state
    assert State.from_dict({"prefill_capacity_tps": "x", "decode_capacity_tps": True}) == State()


def test_the_observation_reads_each_roles_own_rates_hit_rate_and_ready_instances():
    from rebalancing.observe import observation_from_snapshot

    snapshot = {
        "roles": {
            "prefill": {
                "waiting": 6.0,
                "prompt_tps": 30000.0,
                "hit_rate": 0.25,
                "requests_ps": 4.0,
                "ready": 3,
            },
            "decode": {
                "waiting": 0.0,
                "gen_tps": 2000.0,
                "prompt_tps": 30000.0,
                "requests_ps": 4.0,
                "ready": 4,
            },
        },
        "slo": {"ttft_p95_ms": 2100.0, "tbt_p95_ms": 22.0},
        # A decode instance counts the prompts it receives too: the totals double the prompt tokens.
        "totals": {"prompt_tps": 60000.0, "gen_tps": 2000.0},
        "links": [],
        "health": {"state": "healthy"},
    }
    o = observation_from_snapshot(
        snapshot, prefill=4, decode=4, ttft_target_ms=1500, tbt_target_ms=50, busy="", now=10.0
    )
    assert (o.prompt_tps, o.gen_tps, o.prefill_hit_rate) == (30000.0, 2000.0, 0.25)
    assert (o.prefill_requests_ps, o.decode_requests_ps, o.prefill_ready, o.decode_ready) == (4.0, 4.0, 3, 4)
    from rebalancing.demand import learn

    learned = learn(o, State())  # 30k × 0.75 computed over 3 Ready prefill, 6 waiting: saturated
    assert learned.prefill_capacity_tps == 7500 and learned.decode_capacity_tps == 500


def test_reversing_a_predictive_move_soon_needs_twice_the_streak():
    state = State(prefill_capacity_tps=12500, decode_capacity_tps=2200)
    verdicts, state = run([rag_obs(5 * i) for i in range(3)], state=state)
    assert verdicts[-1].rule == "demand_split"
    state = after_move(state, verdicts[-1], ts=10.0, seconds=60.0)
    chat = [
        obs(
            ts=80 + 5 * i,
            prefill=6,
            decode=2,
            ttft=2600,
            tbt=28,
            decode_waiting=150,
            prompt_tps=20000,
            prefill_hit_rate=0.5,
            prefill_requests_ps=20.0,
            gen_tps=4400,
            decode_requests_ps=14.0,
        )
        for i in range(6)
    ]
    verdicts, _ = run(chat, state=state)
    assert [v.action for v in verdicts[:5]] == ["hold"] * 5
    assert verdicts[5].rule == "demand_split" and verdicts[5].action == "move_to_decode"
    # 4.4k tok/s served + 150 queued × 314 tokens (grown over 30 s, cleared within 30 s) ≈ 7.5k tok/s:
    # 5 decode at 68 %; sized by demand, not one instance at a time.
    assert (verdicts[5].prefill, verdicts[5].decode) == (3, 5), verdicts[5].explanation


def test_a_backlog_that_clears_by_itself_moves_nothing():
    state = State(prefill_capacity_tps=12500, decode_capacity_tps=2200)
    queue = [40, 40, 40, 24]  # the queue stops growing, then shrinks by 16 in one interval
    verdicts, _ = run([rag_obs(5 * i, prefill_waiting=w) for i, w in enumerate(queue)], state=state)
    assert verdicts[2].rule == "demand_split"  # sustained and growing: it would move
    last = verdicts[3]
    assert last.rule == "backlog_draining" and last.action == "hold", last.explanation
    assert "40 → 24 waiting on prefill in one interval, empty in about 8 s" in last.explanation
    slow = [40, 40, 40, 38]  # shrinking too slowly to clear within drain_seconds: it acts
    verdicts, _ = run([rag_obs(5 * i, prefill_waiting=w) for i, w in enumerate(slow)], state=state)
    assert verdicts[3].rule == "demand_split"


def test_in_place_switches_undo_overrides_first_and_keep_one_instance_per_role():
    pods = {
        "t-decode-0-0": ("decode", "decode"),
        "t-decode-1-0": ("decode", "decode"),
        "t-prefill-1-0": ("decode", "prefill"),  # switched earlier: back to prefill first
        "t-prefill-0-0": ("prefill", "prefill"),
    }
    assert plan_switches(pods, 3, 1) == [
        {"instance": "t-prefill-1-0", "source_role": "decode", "target_role": "prefill"},
        {"instance": "t-decode-1-0", "source_role": "decode", "target_role": "prefill"},
    ]
    assert plan_switches(pods, 1, 3) == []
    with pytest.raises(ValueError, match="no prefill instance"):
        plan_switches(pods, 0, 4)
    with pytest.raises(ValueError, match="keeps the number of instances"):
        plan_switches(pods, 3, 2)
    with pytest.raises(ValueError, match="t-decode-0-0 is out of routing"):
        plan_switches({**pods, "t-decode-0-0": ("none", "decode")}, 2, 2)


def test_a_predictive_move_leaves_the_donor_two_instances_at_a_budget_of_eight():
    limits = Limits(prefill_min=1, prefill_max=7, decode_min=1, decode_max=7, budget=8)
    profiled = replace(PARAMS, prefill_tokens_per_s=12500, decode_tokens_per_s=2200)
    # 60k tok/s of prompts computed at full speed (and a queue) want 7 prefill; the decode donor keeps two.
    busy = [rag_obs(5 * i, prompt_tps=60000) for i in range(3)]
    verdicts, _ = run(busy, limits=limits, params=profiled)
    assert verdicts[-1].rule == "demand_split" and (verdicts[-1].prefill, verdicts[-1].decode) == (6, 2)
    # With the floor lowered to one, the same demand takes the seventh.
    verdicts, _ = run(busy, limits=limits, params=replace(profiled, donor_keeps=1))
    assert (verdicts[-1].prefill, verdicts[-1].decode) == (7, 1), verdicts[-1].explanation


def test_the_one_instance_move_keeps_the_donor_floor():
    limits = Limits(prefill_min=1, prefill_max=7, decode_min=1, decode_max=7, budget=8)
    # 6P/2D with a TTFT breach: decode keeps two (a third of eight rounds down to two).
    verdicts, _ = run([obs(5 * i, prefill=6, decode=2, ttft=2700, tbt=18) for i in range(3)], limits=limits)
    assert verdicts[-1].action == "hold" and "decode keeps at least 2 instances" in verdicts[-1].explanation
    # With the floor at one the same breach moves one decode.
    verdicts, _ = run(
        [obs(5 * i, prefill=6, decode=2, ttft=2700, tbt=18) for i in range(3)],
        limits=limits,
        params=replace(PARAMS, donor_keeps=1),
    )
    assert verdicts[-1].action == "move_to_prefill"
