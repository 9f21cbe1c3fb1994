"""The router's prefix-blind policy: the same prefix goes round the pods instead of back to its pod."""

from __future__ import annotations

from perfmodel.model.routing import AffinityTable, choose
from sandbox.controllers.routers import prefix_aware

PREFILLS = [("p-a", "g0"), ("p-b", "g0"), ("p-c", "g0")]
DECODES = [("d-a", "g0")]


def _placements(aware: bool) -> list[tuple[str | None, bool]]:
    table = AffinityTable()
    out: list[tuple[str | None, bool]] = []
    for turn in range(6):
        choice = choose(PREFILLS, DECODES, [], [7, 8], table, {}, set(), turn, prefix_aware=aware)
        assert choice is not None and choice.prefill is not None
        table.remember([7, 8], choice.prefill)
        out.append((choice.prefill, choice.affinity_hit))
    return out


def test_round_robin_ignores_the_prefix_and_prefix_aware_returns_to_its_pod() -> None:
    blind = _placements(aware=False)
    assert [pod for pod, _ in blind] == ["p-a", "p-b", "p-c", "p-a", "p-b", "p-c"]
    assert not any(hit for _, hit in blind)
    aware = _placements(aware=True)
    assert [pod for pod, _ in aware] == ["p-a"] * 6 and [hit for _, hit in aware] == [False] + [True] * 5


def test_the_policy_annotation_chooses_round_robin() -> None:
    assert (
        prefix_aware({"metadata": {"annotations": {"sandbox.tandem.io/router-policy": "round-robin"}}})
        is False
    )
    assert prefix_aware({"metadata": {}}) is True


async def test_a_round_robin_router_spreads_a_shared_prefix_and_counts_no_prefix_matches():
    import dataclasses

    import aiohttp

    from sandbox.engine.testing import PDStack
    from sandbox.tests.test_router_routing import FAST, _chat, _links, _router_metrics

    async with PDStack(groups=1, prefill=3, decode=1, env=FAST) as stack, aiohttp.ClientSession() as session:
        router = stack.routers.router("sim/router")
        assert router is not None
        router.spec = dataclasses.replace(router.spec, prefix_aware=False)
        prefix = "system prompt shared by every request of this tenant " * 30
        for i in range(9):
            async with session.post(
                f"{stack.router_url}/v1/chat/completions", json=_chat(f"{prefix} q{i}")
            ) as r:
                assert r.status == 200
        pulls = await _links(session, stack.url("decode-0-0"))
        assert sorted(pulls.values()) == [3, 3, 3], pulls  # each prefill pod served a third
        samples = await _router_metrics(session, stack.router_url)
        counts = [s.value for s in samples if s.name == "kthena_router_prefix_cache_match_ratio_count"]
        assert counts in ([], [0.0])
