"""The hit-rate breakdown: reuse in the traffic, warm placement, engine delivery, and the loss named."""

from __future__ import annotations

import random

from gateway.prefixgroup import prefix_group
from perfmodel.model.routing import AffinityTable, least_loaded
from workload.hitrate import Reuse, Warmth, explain, reuse, warmth_from_placements, warmth_from_router

PROMPTS = [f"You are assistant number {i}. Follow the house style guide strictly." for i in range(3)]
INSTANCES = [f"prefill-{i}" for i in range(32)]  # more instances than a group warms by chance


def traffic(n: int, shared: float, seed: int = 7) -> list[str]:
    """`shared` of the requests use one of three system prompts, the rest a prompt of their own."""
    rng = random.Random(seed)
    groups = []
    for i in range(n):
        system = rng.choice(PROMPTS) if rng.random() < shared else f"A one-off prompt {i}."
        body = {
            "model": "m",
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": "q"}],
        }
        groups.append(prefix_group(body))
    return groups


def test_prefix_blind_routing_of_shared_prompts_is_named_the_loss() -> None:
    groups = traffic(200, 0.6)
    placed = [(g, least_loaded(INSTANCES, {}, turn)) for turn, g in enumerate(groups)]  # round robin
    result = explain(reuse(groups), warmth_from_placements((g, str(p)) for g, p in placed), delivered=0.2)
    assert abs((result.reuse or 0) - 0.6) < 0.06
    assert result.routed_warm is not None and result.routed_warm < 0.6
    assert result.verdict == "routing"
    assert "routing is the loss" in result.sentence
    assert f"{(result.reuse or 0) * 100:.0f} % of requests repeat a prefix" in result.sentence


def test_prefix_aware_routing_of_the_same_traffic_places_repeats_warm() -> None:
    groups = traffic(600, 0.6)
    table = AffinityTable()
    placed = []
    for turn, group in enumerate(groups):
        key = [int(group[:8], 16)]
        pod = table.lookup(key, INSTANCES) or least_loaded(INSTANCES, {}, turn)
        table.remember(key, str(pod))
        placed.append((group, str(pod)))
    result = explain(reuse(groups), warmth_from_placements(placed), delivered=0.55)
    assert result.routed_warm == 1.0
    assert result.verdict == "fine"


def test_low_delivery_on_warm_reuse_points_at_the_engines() -> None:
    result = explain(Reuse(100, 60, 3), Warmth(60, 57, "traces"), delivered=0.05)
    assert result.verdict == "engine"
    assert result.sentence.startswith("The engines delivered a 5 % hit rate on 60 % reuse")
    assert "check prefix caching is on" in result.sentence


def test_little_reuse_has_nothing_to_gain_and_no_requests_says_so() -> None:
    assert explain(reuse(traffic(200, 0.0)), None, 0.0).verdict == "little_reuse"
    assert "nothing to gain" in explain(Reuse(100, 4, 96), None, None).sentence
    empty = explain(reuse(["", ""]), None, None)
    assert empty.verdict == "unknown" and empty.reuse is None


def test_router_histogram_counts_become_warm_placements_of_the_repeats() -> None:
    warmth = warmth_from_router(attempts=100, misses=70)
    result = explain(Reuse(100, 60, 40), warmth, delivered=None)
    assert result.routed_source == "router"
    assert result.routed_warm == 0.5 and result.verdict == "routing"


def test_a_repeat_is_warm_only_on_an_instance_that_served_its_group() -> None:
    warmth = warmth_from_placements([("a", "p0"), ("a", "p1"), ("a", "p0"), ("b", "p1"), ("", "p0")])
    assert (warmth.repeats, warmth.warm) == (2, 1)
