"""The what-if's window and work bounds: a far-future or non-finite end is a 400 naming ``end`` (it was a
500), and the replay of any recorded traffic fits the work budget, so a run cannot tie up a worker."""

from __future__ import annotations

import time

import pytest

from whatif import simulation as whatif


def _bucket(start: float, rate: float, output_len: int = 50, prompt_len: int = 500) -> dict[str, float]:
    return {"start": start, "seconds": 60.0, "rate": rate, "prompt_len": prompt_len, "output_len": output_len}


def _cost(buckets, splits: int) -> float:
    return sum(whatif.replay_seconds(b, splits * whatif.RUNS_PER_SPLIT) for b in buckets)


@pytest.mark.parametrize(
    "end",
    [4e201, time.time() + 3600, float("inf"), float("nan"), 0.0, -1e12],
    ids=["4e201", "an-hour-ahead", "inf", "nan", "zero", "far-past"],  # stable across parallel workers
)
def test_window_problem_names_a_fix_for_ends_that_cannot_be_replayed(end):
    problem = whatif.window_problem(end=end, now=time.time())
    assert problem and ("Unix time" in problem or "after now" in problem or "last 30 days" in problem)


def test_window_problem_accepts_now_a_little_skew_and_last_week():
    now = time.time()
    for end in (now, now + 60, now - 7 * 86400):
        assert whatif.window_problem(end=end, now=now) is None


def test_trim_keeps_small_traffic_whole_and_cuts_a_burst_to_the_budget():
    quiet = [_bucket(60.0 * i, rate=0.2) for i in range(5)]
    assert [b["seconds"] for b in whatif.trim(quiet, splits=3)] == [60.0] * 5
    # 1,000 req/s of 500-token answers for an hour: hours of simulator time untrimmed.
    burst = [_bucket(60.0 * i, rate=1000.0, output_len=500) for i in range(60)]
    kept = whatif.trim(burst, splits=3)
    assert len(kept) == 1 and kept[0]["start"] == 0.0 and 0 < kept[0]["seconds"] < 60
    assert _cost(kept, 3) <= whatif.WORK_BUDGET_SECONDS * 1.01
    # Not one request of 4,096 tokens fits for 30 splits: nothing is replayed (the API says why).
    assert whatif.trim([_bucket(0.0, rate=1.0, output_len=4096)], splits=30) == []
    # Moderate traffic: the latest minutes that fit, within the budget and the request cap.
    moderate = [_bucket(60.0 * i, rate=5.0, output_len=100) for i in range(60)]
    kept = whatif.trim(moderate, splits=3)
    assert 1 <= len(kept) < 60 and kept[0]["start"] == 0.0
    assert _cost(kept, 3) <= whatif.WORK_BUDGET_SECONDS * 1.01
    assert sum(b["rate"] * b["seconds"] for b in kept) <= whatif.MAX_REQUESTS


def test_a_recorded_minute_with_absurd_answer_lengths_is_replayed_at_the_cap():
    history = {
        "start": 0.0,
        "step": 60,
        "timestamps": [0.0],
        "series": {"topology.requests_ps": [1.0], "topology.prompt_tps": [100.0], "topology.gen_tps": [1e9]},
    }
    assert whatif.buckets_from_history(history)[0]["output_len"] == whatif.MAX_OUTPUT_LEN


def test_what_if_api_answers_400_naming_end_for_a_far_future_end(api_client, operator, make_topology):
    api_client.force_authenticate(operator)
    topology = make_topology(budget=4)
    for end in (4e201, time.time() + 86400):
        response = api_client.post(
            f"/api/v1/topologies/{topology.pk}/what-if-runs/",
            {"end": end, "window_seconds": 300},
            format="json",
        )
        assert response.status_code == 400, response.content
        error = response.json()["error"]
        assert error["code"] == "invalid" and "after now" in error["fields"]["end"][0]
