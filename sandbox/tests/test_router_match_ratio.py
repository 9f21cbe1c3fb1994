"""The router's `kthena_router_prefix_cache_match_ratio` in Kthena's shape: per scheduling attempt, the
share of the prompt's blocks the best candidate pod held (its prefix-cache plugin's `matchRatio`)."""

from __future__ import annotations

import pytest

from sandbox.router.matching import PrefixStore


def test_the_best_candidate_leading_blocks_count_and_a_broken_chain_stops_the_match():
    store = PrefixStore()
    store.add([1, 2, 3, 4], "p-a")
    store.add([1, 2], "p-b")
    assert store.ratio([1, 2, 3, 4], ["p-a", "p-b"]) == 1.0
    assert store.ratio([1, 2, 9, 10], ["p-a", "p-b"]) == 0.5
    assert store.ratio([1, 2, 3, 4], ["p-b"]) == 0.5  # only the candidates count
    assert store.ratio([7, 2, 3, 4], ["p-a"]) == 0.0  # chained hashes: no first block, no match
    assert store.ratio([], ["p-a"]) is None  # a prompt without a full block is not recorded


def test_the_store_forgets_its_oldest_blocks_at_capacity():
    store = PrefixStore(capacity=4)
    store.add([1, 2, 3], "p-a")
    store.add([5, 6], "p-a")
    assert store.longest_match([1, 2, 3], ["p-a"]) == 0  # block 1 went first
    assert store.longest_match([5, 6], ["p-a"]) == 2


@pytest.mark.asyncio
async def test_the_router_observes_what_its_candidates_held_for_each_request():
    import aiohttp

    from sandbox.engine.testing import PDStack
    from sandbox.tests.test_router_routing import FAST, _chat, _router_metrics

    shared = " ".join(f"w{i}" for i in range(48))  # with the template, 3 of the prompt's 6 blocks
    first, second = (" ".join(f"{tag}{i}" for i in range(48)) for tag in ("a", "b"))
    async with PDStack(groups=1, prefill=2, decode=1, env=FAST) as stack, aiohttp.ClientSession() as session:
        for content in (f"{shared} {first}", f"{shared} {first}", f"{shared} {second}", "unrelated " * 80):
            async with session.post(f"{stack.router_url}/v1/chat/completions", json=_chat(content)) as r:
                assert r.status == 200, await r.text()
        samples = await _router_metrics(session, stack.router_url)
    series = {
        (s.name, s.labels.get("le")): s.value
        for s in samples
        if s.name.startswith("kthena_router_prefix_cache_match_ratio")
    }
    assert {s.labels.get("model") for s in samples if "match_ratio" in s.name} == {"sim-model"}
    count = series[("kthena_router_prefix_cache_match_ratio_count", None)]
    assert count == 4.0
    assert series[("kthena_router_prefix_cache_match_ratio_bucket", "0.0")] == 2.0  # first and unrelated
    # the second shares 3 of its 6 blocks (0.5), the repeat all of them (1.0)
    assert series[("kthena_router_prefix_cache_match_ratio_bucket", "0.25")] == 2.0
    assert series[("kthena_router_prefix_cache_match_ratio_bucket", "0.5")] == 3.0
    assert series[("kthena_router_prefix_cache_match_ratio_bucket", "0.99")] == 3.0
    assert series[("kthena_router_prefix_cache_match_ratio_sum", None)] == 1.5
