"""The planner's forecast, pure: a smoothed demand per role moves the split before a breach holds, sized
on the learned capacities, with hysteresis (warm-up, the same direction for intervals in a row, never
reversing a recent move) and never for a small gain."""

from __future__ import annotations

from dataclasses import replace

from rebalancing import forecast
from rebalancing.demand import Demand
from rebalancing.policy import Limits, Observation, Params, State, after_move, decide

LIMITS = Limits(prefill_min=1, prefill_max=7, decode_min=1, decode_max=7, budget=8)
PARAMS = Params(breach_intervals=3, cooldown_seconds=30)
MEASURED = State(
    prefill_capacity_tps=12500.0,
    decode_capacity_tps=2240.0,
    prefill_capacity_measured=True,
    decode_capacity_measured=True,
)


def load(ts: float, prompt: float = 48000.0, gen: float = 2000.0, **kw: object) -> Observation:
    """4P/4D within both SLOs and without a queue, computing ``prompt`` uncached tokens/s and generating
    ``gen``: at 48k the four prefills run at 96 % of the 12.5k tok/s each computes."""
    values: dict[str, object] = dict(
        prefill=4,
        decode=4,
        ttft_p95_ms=900.0,
        tbt_p95_ms=30.0,
        prompt_tps=prompt,
        prefill_hit_rate=0.0,
        gen_tps=gen,
        prefill_requests_ps=10.0,
        decode_requests_ps=10.0,
    )
    values.update(kw)
    return Observation(ts=ts, ttft_target_ms=1500.0, tbt_target_ms=50.0, **values)  # type: ignore[arg-type]


def run(
    observations: list[Observation], state: State = MEASURED, params: Params = PARAMS
) -> tuple[list, State]:
    """Each interval decided; a move is carried out at once (taking 5 s), as the planner records it."""
    verdicts = []
    for o in observations:
        verdict, state = decide(o, params, LIMITS, state)
        if verdict.acts:
            state = after_move(state, verdict, o.ts, 5.0)
        verdicts.append(verdict)
    return verdicts, state


def test_the_level_follows_the_demand_and_a_rising_demand_has_a_rising_trend():
    state = State()
    for i in range(20):
        state = forecast.observe(state, Demand(1000.0 + 100.0 * i, 500.0, None, None), PARAMS)
    assert state.forecast_samples == 20
    assert abs(state.forecast_decode_tps - 500.0) < 1e-6 and abs(state.forecast_decode_trend) < 1e-6
    # 100 tok/s more every 5 s interval: a trend of 20 tok/s per s, projected 30 s ahead.
    assert abs(state.forecast_prefill_trend - 20.0) < 1.0
    prompt, gen = forecast.predicted(state, PARAMS)
    assert prompt > state.forecast_prefill_tps + 500.0 and gen == state.forecast_decode_tps


def test_a_falling_trend_is_not_projected():
    state = State(forecast_prefill_tps=100.0, forecast_prefill_trend=-50.0, forecast_samples=8)
    assert forecast.predicted(state, PARAMS)[0] == 100.0


def test_a_sustained_demand_moves_to_the_forecast_split_before_any_breach():
    verdicts, _ = run([load(5.0 * (i + 1)) for i in range(8)])
    acting = [(i, v) for i, v in enumerate(verdicts) if v.acts]
    # Six intervals of warm-up, then the same direction wanted twice in a row: it moves at the seventh.
    assert [i for i, _ in acting] == [6], [v.explanation for v in verdicts]
    moved = acting[0][1]
    assert moved.rule == "forecast_split" and moved.action == "move_to_prefill"
    assert (moved.prefill, moved.decode) == (5, 3)
    assert all(v.rule == "steady" for v in verdicts[:6])
    text = moved.explanation
    assert "1 decode → prefill (4P/4D → 5P/3D) before a breach holds" in text
    assert "prompt demand 48.0k tok/s uncached" in text and "12.5k tok/s each (measured)" in text
    assert "at 4P/4D prefill would run at 96%, decode at 22%" in text
    assert "at 5P/3D prefill would run at 77%, decode at 30%" in text
    assert "1.20 → 0.96" in text and "wanted for 2 intervals" in text


def test_with_the_forecast_off_the_same_load_holds():
    verdicts, _ = run([load(5.0 * (i + 1)) for i in range(8)], params=replace(PARAMS, forecast_split=False))
    assert {v.rule for v in verdicts} == {"steady"}


def test_a_single_burst_moves_nothing():
    light = [load(5.0 * (i + 1), prompt=20000.0) for i in range(8)]
    burst = load(45.0, prompt=150000.0)
    after = [load(5.0 * (i + 10), prompt=20000.0) for i in range(2)]
    verdicts, state = run([*light, burst, *after])
    assert not any(v.acts for v in verdicts), [v.explanation for v in verdicts if v.acts]
    assert state.forecast_streak <= 1


def test_no_move_for_a_gain_below_the_threshold():
    # 42k: the four prefills at 84 % (1.05 of the target); five would run at 67 % (0.84): a gain of 0.21.
    verdicts, _ = run([load(5.0 * (i + 1), prompt=42000.0) for i in range(8)])
    assert any(v.rule == "forecast_split" for v in verdicts)
    verdicts, _ = run(
        [load(5.0 * (i + 1), prompt=42000.0) for i in range(8)], params=replace(PARAMS, forecast_gain=0.25)
    )
    assert not any(v.acts for v in verdicts)


def test_a_split_that_already_fits_its_target_is_kept():
    verdicts, _ = run([load(5.0 * (i + 1), prompt=38000.0) for i in range(10)])
    assert {v.rule for v in verdicts} == {"steady"}


def test_it_does_not_reverse_a_recent_move():
    # Just moved 4P/4D → 3P/5D toward decode; now the prompt demand wants prefill back.
    start = replace(MEASURED, forecast_prefill_tps=48000.0, forecast_decode_tps=2000.0, forecast_samples=8)
    moved = decide(load(0.0), PARAMS, LIMITS, start)[0]
    state = after_move(start, replace(moved, action="move_to_decode"), 0.0, 5.0)
    verdicts, _ = run([load(35.0 + 5.0 * i) for i in range(10)], state)  # 35 … 80 s: within 120 s
    assert not any(v.acts for v in verdicts), [v.explanation for v in verdicts if v.acts]
    verdicts, _ = run([load(125.0 + 5.0 * i) for i in range(2)], state)  # past the flap window
    assert verdicts[-1].rule == "forecast_split" and verdicts[-1].action == "move_to_prefill"


def test_a_donor_under_pressure_gives_nothing():
    # Decode misses its TBT target every other interval (never held): no decode leaves for prefill.
    flapping = [load(5.0 * (i + 1), tbt_p95_ms=60.0 if i % 2 else 30.0) for i in range(10)]
    verdicts, _ = run(flapping)
    assert not any(v.acts for v in verdicts), [v.explanation for v in verdicts if v.acts]


def test_a_donor_with_a_queue_gives_nothing():
    verdicts, _ = run([load(5.0 * (i + 1), decode_waiting=12.0) for i in range(8)])
    assert not any(v.acts for v in verdicts)


def test_a_decode_donor_whose_kv_would_fill_on_fewer_instances_gives_nothing():
    # 80 % KV on four decodes (not pressure yet) would be 107 % on three.
    verdicts, _ = run([load(5.0 * (i + 1), decode_kv_usage=0.8) for i in range(8)])
    assert not any(v.acts for v in verdicts)
    verdicts, _ = run([load(5.0 * (i + 1), decode_kv_usage=0.6) for i in range(8)])
    assert any(v.rule == "forecast_split" for v in verdicts)


def test_without_capacities_the_forecast_does_not_move():
    verdicts, _ = run([load(5.0 * (i + 1), prompt_tps=None, gen_tps=None) for i in range(8)], State())
    assert not any(v.acts for v in verdicts)


def test_a_role_whose_capacity_is_only_a_lower_bound_is_not_grown():
    light = replace(MEASURED, prefill_capacity_measured=False)
    verdicts, _ = run([load(5.0 * (i + 1)) for i in range(8)], light)
    assert not any(v.acts for v in verdicts)
    # The donor's may be a lower bound: it only makes the donor keep more.
    verdicts, _ = run(
        [load(5.0 * (i + 1)) for i in range(8)], replace(MEASURED, decode_capacity_measured=False)
    )
    assert any(v.rule == "forecast_split" for v in verdicts)


def test_a_sustained_breach_is_still_judged_by_the_breach_rules():
    # 60k prompt tokens/s, TTFT above target: the breach rules decide once it holds (demand_split here),
    # with no earlier forecast move because the warm-up has not passed.
    verdicts, _ = run([load(5.0 * (i + 1), prompt=60000.0, ttft_p95_ms=2500.0) for i in range(3)])
    assert verdicts[-1].rule == "demand_split" and verdicts[-1].action == "move_to_prefill"


def test_the_forecast_survives_the_stored_state():
    _, state = run([load(5.0 * (i + 1)) for i in range(5)])
    assert state.forecast_samples == 5 and state.forecast_prefill_tps > 0
    trend = replace(state, forecast_prefill_trend=-12.5, forecast_role="decode", forecast_streak=1)
    for kept in (state, trend):
        back = State.from_dict(kept.as_dict())
        assert {k: v for k, v in back.as_dict().items() if k.startswith("forecast_")} == {
            k: v for k, v in kept.as_dict().items() if k.startswith("forecast_")
        }


def test_the_planner_settings_take_every_forecast_parameter_and_check_its_range():
    from dataclasses import fields

    import pytest

    from controlplane.api.errors import DomainError
    from rebalancing.services.planner import BOOL_PARAMS, PARAM_LIMITS, clean_params

    assert {f.name for f in fields(Params)} == set(PARAM_LIMITS) | set(BOOL_PARAMS)
    cleaned = clean_params(
        {
            "forecast_split": False,
            "forecast_alpha": 0.5,
            "forecast_horizon_seconds": 0,
            "forecast_warmup": 4,
            "forecast_intervals": 3,
            "forecast_gain": 0.2,
        }
    )
    assert cleaned == {
        "forecast_split": False,
        "forecast_alpha": 0.5,
        "forecast_horizon_seconds": 0.0,
        "forecast_warmup": 4,
        "forecast_intervals": 3,
        "forecast_gain": 0.2,
    }
    assert isinstance(cleaned["forecast_warmup"], int)
    with pytest.raises(DomainError) as refused:
        clean_params({"forecast_alpha": 0, "forecast_split": "yes"})
    assert refused.value.fields == {
        "params.forecast_alpha": ["use a number from 0.01 to 1"],
        "params.forecast_split": ["use true or false"],
    }
