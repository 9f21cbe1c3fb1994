"""How the P/D router picks pods — pure functions and a small affinity table, tested without a network.

Prefill: prefix affinity first — the prompt's leading block hashes (block size 16, up to
`AFFINITY_BLOCKS` blocks) are looked up deepest-first in a bounded table of which prefill pod
served that prefix recently; a hit on a ready pod wins (its prefix cache holds those blocks).
Otherwise the ready prefill pod with the fewest in-flight requests (ties in turn). A router whose
policy is `round-robin` skips the affinity lookup (prefix-blind, for comparison). Decode: among the
ready decode pods of the prefill pod's group (the `pdGroup.groupKey` label value), the fewest
in-flight. Without prefill pods, pods of role `both` serve whole requests.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

AFFINITY_BLOCKS = 8
AFFINITY_ENTRIES = 4096
AFFINITY_TTL_SECONDS = 300.0


@dataclass(frozen=True)
class Choice:
    prefill: str | None  # pod name, None when a `both` pod serves the whole request
    decode: str
    affinity_hit: bool


class AffinityTable:
    def __init__(self, capacity: int = AFFINITY_ENTRIES, ttl: float = AFFINITY_TTL_SECONDS) -> None:
        self.capacity = capacity
        self.ttl = ttl
        self._entries: OrderedDict[int, tuple[str, float]] = OrderedDict()

    def lookup(self, hashes: Sequence[int], usable: Iterable[str]) -> str | None:
        allowed = set(usable)
        now = time.monotonic()
        for block in reversed(hashes):
            entry = self._entries.get(block)
            if entry is None:
                continue
            pod, seen = entry
            if now - seen > self.ttl:
                del self._entries[block]
                continue
            if pod in allowed:
                self._entries.move_to_end(block)
                return pod
        return None

    def remember(self, hashes: Sequence[int], pod: str) -> None:
        now = time.monotonic()
        for block in hashes:
            self._entries[block] = (pod, now)
            self._entries.move_to_end(block)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)


def least_loaded(pods: Iterable[str], inflight: Mapping[str, int], turn: int = 0) -> str | None:
    """The pod with the fewest in-flight requests; ties rotate with `turn` (round-robin among equals)."""
    ordered = sorted(pods, key=lambda pod: (inflight.get(pod, 0), pod))
    if not ordered:
        return None
    lowest = inflight.get(ordered[0], 0)
    ties = [pod for pod in ordered if inflight.get(pod, 0) == lowest]
    return ties[turn % len(ties)]


def choose(
    prefills: Sequence[tuple[str, str]],
    decodes: Sequence[tuple[str, str]],
    boths: Sequence[str],
    hashes: Sequence[int],
    affinity: AffinityTable,
    inflight: Mapping[str, int],
    exclude: set[str],
    turn: int = 0,
    *,
    prefix_aware: bool = True,
) -> Choice | None:
    """`prefills`/`decodes` are (pod, group) of ready pods; `exclude` holds pods that just failed.
    ``prefix_aware=False`` ignores the affinity table: the fewest in-flight, ties in turn (round robin
    when idle), like Kthena's scheduler without its `prefix-cache` score plugin."""
    if not prefix_aware:
        hashes = ()
    groups_with_decode = {group for pod, group in decodes if pod not in exclude}
    candidates = [
        (pod, group) for pod, group in prefills if pod not in exclude and group in groups_with_decode
    ]
    if candidates:
        names = [pod for pod, _ in candidates]
        prefill = affinity.lookup(hashes, names)
        hit = prefill is not None
        if prefill is None:
            prefill = least_loaded(names, inflight, turn)
        assert prefill is not None
        group = dict(candidates)[prefill]
        decode = least_loaded(
            [pod for pod, g in decodes if g == group and pod not in exclude], inflight, turn
        )
        if decode is not None:
            return Choice(prefill=prefill, decode=decode, affinity_hit=hit)
    usable = [pod for pod in boths if pod not in exclude]
    if usable:
        pod = affinity.lookup(hashes, usable)
        hit = pod is not None
        return Choice(
            prefill=None, decode=pod or least_loaded(usable, inflight) or usable[0], affinity_hit=hit
        )
    return None
