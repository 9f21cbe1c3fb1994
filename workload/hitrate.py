"""Why the prefix-cache hit rate is what it is: reuse in the traffic, warm routing, the engines' delivery.

Three shares over one window, each a pure function of counts:

- reuse available: requests whose prefix group was already seen earlier in the window;
- routed warm: of those repeats, the ones placed on an instance that had served that group before
  (from the router's `kthena_router_prefix_cache_match_ratio` histogram when counted, else from the kept
  traces' engine spans, which name the instance);
- delivered: the engines' own prefix-cache hit rate (vLLM's hits / queries in tokens, telemetry).

`explain` names the largest loss in words.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

LITTLE_REUSE = 0.10  # below this share of repeats there is little for a prefix cache to gain
ROUTING_LOSS = 0.6  # routed warm below this share of the repeats: routing loses most of the reuse
DELIVERY_LOSS = 0.5  # delivered below half of what warm routing made possible: the engines lose it


@dataclass(frozen=True)
class Reuse:
    requests: int  # requests with a prefix group in the window
    repeats: int  # of them, whose group was seen earlier in the window
    groups: int  # distinct groups


@dataclass(frozen=True)
class Warmth:
    repeats: int  # repeated requests whose instance is known
    warm: int  # of them, placed on an instance that had served the group
    source: str  # router | traces


@dataclass(frozen=True)
class Explanation:
    requests: int
    reuse: float | None
    routed_warm: float | None
    routed_source: str  # router | traces | "" (unknown)
    delivered: float | None
    verdict: str  # little_reuse | routing | engine | fine | unknown
    sentence: str


def reuse(groups: Iterable[str]) -> Reuse:
    """Counts over the window's request groups in arrival order ("" groups are not counted)."""
    seen: set[str] = set()
    requests = repeats = 0
    for group in groups:
        if not group:
            continue
        requests += 1
        if group in seen:
            repeats += 1
        else:
            seen.add(group)
    return Reuse(requests=requests, repeats=repeats, groups=len(seen))


def warmth_from_placements(placements: Iterable[tuple[str, str]]) -> Warmth:
    """(group, instance) in arrival order: a repeat is warm when that instance served the group before."""
    served: set[tuple[str, str]] = set()
    seen: set[str] = set()
    repeats = warm = 0
    for group, instance in placements:
        if not group or not instance:
            continue
        if group in seen:
            repeats += 1
            warm += (group, instance) in served
        seen.add(group)
        served.add((group, instance))
    return Warmth(repeats=repeats, warm=warm, source="traces")


def warmth_from_router(*, attempts: float, misses: float) -> Warmth:
    """From the router's match-ratio histogram over the window: its count and its `le="0"` bucket."""
    return Warmth(repeats=round(attempts), warm=round(max(0.0, attempts - misses)), source="router")


def _pct(value: float) -> str:
    return f"{value * 100:.0f} %"


def explain(counts: Reuse, warmth: Warmth | None, delivered: float | None) -> Explanation:
    """The three shares and the largest gap between them, in words."""
    share = counts.repeats / counts.requests if counts.requests else None
    warm: float | None = None
    source = ""
    if warmth is not None and warmth.repeats:
        warm, source = warmth.warm / warmth.repeats, warmth.source
        if warmth.source == "router" and counts.repeats:
            # The router counts a match on every request; the warm placements among the repeats are
            # its hits over the repeats (first sightings can never be warm).
            warm = min(1.0, warmth.warm / counts.repeats)
    if share is None:
        return Explanation(
            0, None, warm, source, delivered, "unknown", "No requests with a prompt in this window."
        )
    if share < LITTLE_REUSE:
        sentence = f"{_pct(share)} of requests repeat a prefix: little reuse in the traffic, nothing to gain."
        return Explanation(counts.requests, share, warm, source, delivered, "little_reuse", sentence)
    head = f"{_pct(share)} of requests repeat a prefix"
    if warm is not None and warm < ROUTING_LOSS:
        sentence = f"{head}, the router placed {_pct(warm)} of them on a warm instance: routing is the loss."
        return Explanation(counts.requests, share, warm, source, delivered, "routing", sentence)
    possible = share * (warm if warm is not None else 1.0)
    if delivered is not None and delivered < possible * DELIVERY_LOSS:
        sentence = (
            f"The engines delivered a {_pct(delivered)} hit rate on {_pct(share)} reuse"
            + (f" ({_pct(warm)} routed warm)" if warm is not None else "")
            + ": check prefix caching is on and the cache is large enough."
        )
        return Explanation(counts.requests, share, warm, source, delivered, "engine", sentence)
    if warm is None and delivered is None:
        sentence = f"{head}; where they were placed and what the engines delivered is not known yet."
        return Explanation(counts.requests, share, warm, source, delivered, "unknown", sentence)
    sentence = f"{head}" + (f", {_pct(warm)} of them routed warm" if warm is not None else "")
    sentence += (
        f", the engines delivered {_pct(delivered)}" if delivered is not None else ""
    ) + ": no large loss."
    return Explanation(counts.requests, share, warm, source, delivered, "fine", sentence)
