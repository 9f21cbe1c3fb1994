"""Workload plans and quantiles: pure, deterministic, no network."""

from __future__ import annotations

import itertools

import pytest

from sandbox.engine.tokens import count_tokens
from sandbox.load import Workload, plan, quantile, schedule
from sandbox.load.report import Quantiles


def test_constant_pattern_sends_evenly_spaced_requests():
    times = schedule(Workload(rate=4, duration=2.5))
    assert [t for t, _ in times] == [i / 4 for i in range(10)]
    assert {kind for _, kind in times} == {"normal"}


def test_poisson_pattern_has_the_rate_on_average_with_exponential_gaps_and_repeats_per_seed():
    times = [t for t, _ in schedule(Workload(rate=50, duration=40, pattern="poisson"))]
    assert 1800 <= len(times) <= 2200
    gaps = [b - a for a, b in itertools.pairwise(times)]
    mean = sum(gaps) / len(gaps)
    variance = sum((g - mean) ** 2 for g in gaps) / len(gaps)
    assert 0.8 < variance**0.5 / mean < 1.2  # exponential: the spread equals the mean (constant: 0)
    assert times == [t for t, _ in schedule(Workload(rate=50, duration=40, pattern="poisson"))]
    assert times != [t for t, _ in schedule(Workload(rate=50, duration=40, pattern="poisson", seed=8))]


def test_diurnal_pattern_keeps_the_mean_rate_and_swings_around_it():
    times = [t for t, _ in schedule(Workload(rate=20, duration=10, pattern="diurnal"))]
    assert 150 <= len(times) <= 250
    first_quarter = sum(1 for t in times if t < 2.5)
    middle = sum(1 for t in times if 3.75 <= t < 6.25)
    assert middle > 2 * first_quarter  # the peak is mid-period


def test_phase_pattern_alternates_prompt_heavy_and_generation_heavy():
    planned = plan(
        Workload(rate=2, duration=8, pattern="phase", phase_seconds=2, prompt_tokens=64, max_tokens=32)
    )
    kinds = [(p.at, p.kind) for p in planned]
    assert {k for t, k in kinds if t < 2} == {"prompt_heavy"}
    assert {k for t, k in kinds if 2 <= t < 4} == {"generation_heavy"}
    assert {k for t, k in kinds if 4 <= t < 6} == {"prompt_heavy"}
    heavy = next(p for p in planned if p.kind == "prompt_heavy")
    light = next(p for p in planned if p.kind == "generation_heavy")
    assert count_tokens(heavy.prompt) > 8 * count_tokens(light.prompt)
    assert light.max_tokens > 8 * heavy.max_tokens


def test_shared_prefix_fraction_and_prefix_length():
    planned = plan(
        Workload(rate=50, duration=4, shared_prefix_fraction=0.6, prefix_tokens=512, num_prefixes=2)
    )
    shared = [p for p in planned if p.shared]
    assert 0.5 < len(shared) / len(planned) < 0.7
    prefixes = {" ".join(p.prompt.split()[:512]) for p in shared}
    assert len(prefixes) == 2
    assert all(count_tokens(p.prompt) == 512 + 256 for p in shared)
    assert plan(Workload(rate=50, duration=4, shared_prefix_fraction=0.6)) == plan(
        Workload(rate=50, duration=4, shared_prefix_fraction=0.6)
    )  # deterministic per seed


def test_invalid_workloads_name_the_fields():
    with pytest.raises(ValueError, match="rate, pattern, shared_prefix_fraction"):
        schedule(Workload(rate=0, duration=1, pattern="spiky", shared_prefix_fraction=2))


def test_quantiles_interpolate_between_ranks():
    values = [float(v) for v in range(1, 101)]
    assert quantile(values, 0.5) == pytest.approx(50.5)
    assert quantile(values, 0.95) == pytest.approx(95.05)
    assert quantile(values, 0.99) == pytest.approx(99.01)
    assert quantile([], 0.5) == 0.0
    q = Quantiles.of([3.0, 1.0, 2.0])
    assert (q.p50, q.mean, q.max, q.count) == (2.0, 2.0, 3.0, 3)


def test_load_and_fault_subcommands_register_on_a_parent_parser():
    import argparse

    from sandbox.engine.cli import add_fault_subcommand
    from sandbox.load.cli import add_load_subcommand

    parser = argparse.ArgumentParser(prog="python -m sandbox")
    commands = parser.add_subparsers(dest="command")
    add_load_subcommand(commands)
    add_fault_subcommand(commands)
    load = parser.parse_args(
        [
            "load",
            "--url",
            "http://127.0.0.1:1",
            "--model",
            "m",
            "--rate",
            "2",
            "--duration",
            "3",
            "--pattern",
            "diurnal",
            "--shared-prefix-fraction",
            "0.6",
            "--json",
        ]
    )
    assert (load.command, load.pattern, load.shared_prefix_fraction, load.json) == (
        "load",
        "diurnal",
        0.6,
        True,
    )
    fault = parser.parse_args(
        ["fault", "--pod-ip", "127.0.5.2", "--kind", "link_down", "--peer", "prefill-0"]
    )
    assert (fault.kind, fault.peer, fault.port) == ("link_down", "prefill-0", 8000)
    assert callable(load.func) and callable(fault.func)
