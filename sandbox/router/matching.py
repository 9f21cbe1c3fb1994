"""Which pods served which prompt blocks, as Kthena's `prefix-cache` score plugin keeps it, for the
router's `kthena_router_prefix_cache_match_ratio` (pure, no network).

Kthena (volcano-sh/kthena `pkg/kthena-router/scheduler/plugins/prefix_cache.go`): `Score` hashes the
prompt into chained block hashes, finds for each candidate pod how many of them it holds
(`ModelPrefixStore.FindTopMatches`), and records `matched / total` of the best-matching candidate (0 on
a miss, nothing for a prompt without a block); `PostSchedule` adds the prompt's hashes for the chosen
prefill and decode pods. The ratio is the locality *available* among the candidates, not necessarily
that of the pod finally chosen.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence

ENTRIES = 16384  # (block, pod) pairs kept; the oldest go first, as Kthena's bounded per-model store


class PrefixStore:
    def __init__(self, capacity: int = ENTRIES) -> None:
        self.capacity = capacity
        self._pods: OrderedDict[tuple[int, str], None] = OrderedDict()

    def longest_match(self, hashes: Sequence[int], candidates: Iterable[str]) -> int:
        """The most leading blocks of the prompt one candidate holds (chained hashes: a block matches
        only after all blocks before it)."""
        best = 0
        for pod in candidates:
            matched = 0
            for block in hashes:
                if (block, pod) not in self._pods:
                    break
                matched += 1
            best = max(best, matched)
        return best

    def ratio(self, hashes: Sequence[int], candidates: Iterable[str]) -> float | None:
        """`matched / total` of the best candidate (Kthena's `matchRatio`); None for a prompt without a
        full block, which Kthena does not record."""
        if not hashes:
            return None
        return self.longest_match(hashes, candidates) / len(hashes)

    def add(self, hashes: Sequence[int], pod: str) -> None:
        for block in hashes:
            key = (block, pod)
            self._pods[key] = None
            self._pods.move_to_end(key)
        while len(self._pods) > self.capacity:
            self._pods.popitem(last=False)

    def record(
        self,
        hashes: Sequence[int],
        candidates: Sequence[str],
        chosen: Iterable[str | None],
        observe: Callable[[float], None],
    ) -> None:
        """One scheduling attempt: observe the best candidate's ratio (`Score`), then the chosen pods
        hold the prompt's blocks (`PostSchedule`)."""
        ratio = self.ratio(hashes, candidates)
        if ratio is not None:
            observe(ratio)
        for pod in chosen:
            if pod is not None:
                self.add(hashes, pod)
