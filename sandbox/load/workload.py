"""Open-loop workloads: when each request is sent and what it asks — pure and deterministic per seed.

Patterns: `constant` (evenly spaced at `rate`/s), `poisson` (independent arrivals at `rate`/s on average,
exponential gaps: the queueing real traffic sees), `diurnal` (rate swings between 0.2× and 1.8× of
`rate` over one period = the duration; the mean stays `rate`), `phase` (constant rate, alternating
prompt-heavy and generation-heavy phases of `phase_seconds`, default half the duration).
A `shared_prefix_fraction` of requests start with one of `num_prefixes` long shared prefixes of
`prefix_tokens` tokens (the rest of their prompt is unique), so the prefix cache has work to do.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

PATTERNS = ("constant", "poisson", "diurnal", "phase")
KINDS = ("normal", "prompt_heavy", "generation_heavy")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class Workload:
    rate: float
    duration: float
    pattern: str = "constant"
    shared_prefix_fraction: float = 0.0
    prefix_tokens: int = 1024
    prompt_tokens: int = 256  # unique part of a normal request
    max_tokens: int = 64
    num_prefixes: int = 4
    phase_seconds: float | None = None
    seed: int = 7

    def validate(self) -> None:
        problems = {
            "rate": self.rate > 0,
            "duration": self.duration > 0,
            "pattern": self.pattern in PATTERNS,
            "shared_prefix_fraction": 0 <= self.shared_prefix_fraction <= 1,
            "prefix_tokens": self.prefix_tokens >= 0,
            "prompt_tokens": self.prompt_tokens >= 1,
            "max_tokens": self.max_tokens >= 1,
            "num_prefixes": self.num_prefixes >= 1,
        }
        bad = [name for name, ok in problems.items() if not ok]
        if bad:
            raise ValueError(
                f"invalid workload: {', '.join(bad)} (rate and duration > 0, pattern one of "
                f"{'/'.join(PATTERNS)}, shared_prefix_fraction in 0..1, token counts >= 1)"
            )


@dataclass(frozen=True)
class PlannedRequest:
    at: float  # seconds after the start
    kind: str  # normal | prompt_heavy | generation_heavy
    prompt: str
    max_tokens: int
    shared: bool


def schedule(workload: Workload) -> list[tuple[float, str]]:
    """(send time, kind) for every request of the run."""
    workload.validate()
    times: list[float] = []
    if workload.pattern == "diurnal":
        t = 0.0
        while t < workload.duration:
            times.append(t)
            current = workload.rate * (1 - 0.8 * math.cos(2 * math.pi * t / workload.duration))
            t += 1 / max(current, workload.rate * 0.2)
    elif workload.pattern == "poisson":
        rng = random.Random(workload.seed)
        t = rng.expovariate(workload.rate)
        while t < workload.duration:
            times.append(t)
            t += rng.expovariate(workload.rate)
    else:
        count = max(1, int(workload.rate * workload.duration))
        times = [i / workload.rate for i in range(count)]
    if workload.pattern != "phase":
        return [(t, "normal") for t in times]
    phase = workload.phase_seconds or workload.duration / 2
    return [(t, KINDS[1 + int(t // phase) % 2]) for t in times]


def words(rng: random.Random, count: int) -> str:
    """`count` random four-letter words: exactly `count` tokens for the simulated tokenizer."""
    return " ".join("".join(rng.choice(_LETTERS) for _ in range(4)) for _ in range(count))


def plan(workload: Workload) -> list[PlannedRequest]:
    rng = random.Random(workload.seed)
    prefixes = [
        words(random.Random(workload.seed * 1000 + i), workload.prefix_tokens)
        for i in range(workload.num_prefixes)
    ]
    out: list[PlannedRequest] = []
    for at, kind in schedule(workload):
        if kind == "prompt_heavy":
            unique, max_tokens = workload.prompt_tokens * 4, max(1, workload.max_tokens // 8)
        elif kind == "generation_heavy":
            unique, max_tokens = max(8, workload.prompt_tokens // 8), workload.max_tokens * 4
        else:
            unique, max_tokens = workload.prompt_tokens, workload.max_tokens
        shared = workload.prefix_tokens > 0 and rng.random() < workload.shared_prefix_fraction
        body = words(rng, unique)
        prompt = f"{rng.choice(prefixes)} {body}" if shared else body
        out.append(PlannedRequest(at=at, kind=kind, prompt=prompt, max_tokens=max_tokens, shared=shared))
    return out
