"""The planner's demand rules, pure: a donor spared only if its measured demand fits on one instance
fewer, capacities trusted only once measured at full speed, and a step in the mix read from the queue's
growth in the last interval."""

from __future__ import annotations

from rebalancing.demand import demand, learn
from rebalancing.policy import Limits, Observation, Params, State, decide

LIMITS = Limits(prefill_min=1, prefill_max=7, decode_min=1, decode_max=7, budget=8)
PARAMS = Params(breach_intervals=3, cooldown_seconds=30)


def chat(ts: float, **kw: object) -> Observation:
    """2P/6D under a chat load that keeps both roles busy: prefill queues (26 waiting, TTFT still within
    its target), decode generates 11.7k tok/s (TBT 28 ms, far within its 50 ms target)."""
    values: dict[str, object] = dict(
        prefill=2,
        decode=6,
        ttft_p95_ms=1070.0,
        tbt_p95_ms=28.0,
        prefill_waiting=26.0,
        decode_waiting=0.0,
        prompt_tps=39000.0,
        prefill_hit_rate=0.5,
        prefill_requests_ps=39.0,
        gen_tps=11700.0,
        decode_requests_ps=39.0,
    )
    values.update(kw)
    return Observation(ts=ts, ttft_target_ms=1500.0, tbt_target_ms=50.0, **values)  # type: ignore[arg-type]


def run(observations: list[Observation], state: State) -> list:
    verdicts = []
    for o in observations:
        verdict, state = decide(o, PARAMS, LIMITS, state)
        verdicts.append(verdict)
    return verdicts


MEASURED = State(
    prefill_capacity_tps=12500.0,
    decode_capacity_tps=2240.0,
    prefill_capacity_measured=True,
    decode_capacity_measured=True,
)


def test_a_donor_whose_throughput_is_used_up_is_not_spared_although_its_latency_is_fine():
    verdicts = run([chat(5.0 * i) for i in range(4)], MEASURED)
    assert {v.action for v in verdicts} == {"hold"}
    last = verdicts[-1]
    assert last.rule == "ttft_breach", last.explanation
    assert "no decode can be spared" in last.explanation
    assert "decode serves 11.7k tok/s of generation demand at 2.2k tok/s each" in last.explanation
    assert "on 5 instances it would run at 104% (above 80%)" in last.explanation


def test_a_capacity_seen_only_under_light_load_does_not_block_the_move():
    # The same rates, but decode was never seen at full speed: 2240 tok/s is only a lower bound of
    # what one serves, so the latency rule decides (TBT 28 ms on 5 instances ≈ 34 ms < 40 ms).
    state = State(prefill_capacity_tps=12500.0, decode_capacity_tps=2240.0)
    verdicts = run([chat(5.0 * i) for i in range(3)], state)
    assert verdicts[-1].action == "move_to_prefill", verdicts[-1].explanation
    assert (verdicts[-1].prefill, verdicts[-1].decode) == (3, 5)


def test_a_capacity_counts_as_measured_only_under_a_real_queue():
    short = learn(chat(0.0, prefill_waiting=4.0), State())  # 2 waiting per prefill: bursts, not full speed
    assert short.prefill_capacity_tps == 19500.0 / 2 and not short.prefill_capacity_measured
    full = learn(chat(5.0, prefill_waiting=8.0), short)  # 4 per instance: the served rate is the capacity
    assert full.prefill_capacity_measured
    slow = learn(chat(10.0, tbt_p95_ms=60.0, prefill_waiting=0.0), State())  # TBT over target: full speed
    assert slow.decode_capacity_measured and not slow.prefill_capacity_measured
    assert State.from_dict(full.as_dict()) == full
    assert not State.from_dict({"prefill_capacity_measured": "yes"}).prefill_capacity_measured


def test_a_queue_growing_fast_now_counts_at_its_present_pace():
    # 30 requests of 8k tokens waiting after 3 intervals: on average 16k tok/s more than served; but 20 of
    # them arrived in the last interval (a step in the mix): 32k tok/s more than served.
    now = chat(
        15.0,
        prefill_waiting=30.0,
        prompt_tps=25000.0,
        prefill_hit_rate=0.0,
        prefill_requests_ps=25000.0 / 8000,
    )
    state = State(ttft_streak=3, prefill_capacity_tps=12500.0, decode_capacity_tps=2240.0)
    average = demand(now, PARAMS, state)
    stepped = demand(now, PARAMS, state, {"prefill": 10.0, "decode": 0.0})
    assert round(average.prefill_tps) == 25000 + 16000 + 8000  # + clearing 240k tokens within 30 s
    assert round(stepped.prefill_tps) == 25000 + 32000 + 8000
    shrinking = demand(now, PARAMS, state, {"prefill": 40.0})
    assert shrinking.prefill_tps == average.prefill_tps
