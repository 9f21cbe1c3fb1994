"""The rebalancing benchmark's workloads (W1 mix shift, W2 sinusoidal long prompts, W3 steady chat) as
simulator traces; bench/rebalance_planner.py states why the rates, phases and periods are what they are."""

from __future__ import annotations

import math
import random

from perfmodel.sim.types import SimRequest

CHAT_PROMPTS = 16  # distinct system prompts in W1's chat phase


def _poisson(rng: random.Random, t0: float, t1: float, rate: float) -> list[float]:
    out, t = [], t0 + rng.expovariate(rate)
    while t < t1:
        out.append(t)
        t += rng.expovariate(rate)
    return out


def w1(scale: float, duration: float, seed: int = 1, phase: float = 600.0) -> list[SimRequest]:
    """Mix shift: phases of ``phase`` seconds alternating chat (12 req/s, 1k/300, each request opening
    with one of 16 system prompts of 512 tokens) and RAG (2 req/s, 8k/200, no shared prefix), × scale."""
    rng = random.Random(seed)
    out: list[SimRequest] = []
    t = 0.0
    index = 0
    while t < duration:
        rag = index % 2 == 1
        rate = (2.0 if rag else 12.0) * scale
        for at in _poisson(rng, t, min(duration, t + phase), rate):
            if rag:
                out.append(SimRequest(at, int(rng.gauss(8000, 600)), int(rng.gauss(200, 30)), kind="rag"))
            else:
                out.append(
                    SimRequest(
                        at,
                        int(rng.gauss(1000, 150)),
                        int(rng.gauss(300, 50)),
                        prefix=rng.randrange(CHAT_PROMPTS),
                        prefix_len=512,
                        kind="chat",
                    )
                )
        t += phase
        index += 1
    return [r for r in out if r.prompt_len > 16 and r.output_len > 1]


def w2_rate(t: float, duration: float, scale: float) -> float:
    period = duration
    return scale * (1 + 7 * (0.5 - 0.5 * math.cos(2 * math.pi * t / period)))


def w2(scale: float, duration: float, seed: int = 2) -> list[SimRequest]:
    """Sinusoidal long prompts: ISL 8000 / OSL 1000, rate 1→8→1 req/s (× scale) over the run."""
    rng = random.Random(seed)
    out: list[SimRequest] = []
    peak = 8 * scale
    t = 0.0
    while True:  # thinning of a Poisson process at the peak rate
        t += rng.expovariate(peak)
        if t >= duration:
            break
        if rng.random() <= w2_rate(t, duration, scale) / peak:
            out.append(SimRequest(t, 8000, 1000, kind="peak" if w2_rate(t, duration, 1) > 6 else "long"))
    return out


def w3(scale: float, duration: float, seed: int = 3) -> list[SimRequest]:
    rng = random.Random(seed)
    return [
        SimRequest(at, int(rng.gauss(1000, 150)), int(rng.gauss(300, 50)), prefix=0, prefix_len=512)
        for at in _poisson(rng, 0.0, duration, 4.0 * scale)
    ]


WORKLOADS = {"W1": w1, "W2": w2, "W3": w3}
SCALES = {
    "W1": tuple(0.5 + 0.25 * i for i in range(15)),  # 0.5 … 4.0
    "W2": (0.5, 0.75, 1.0),
    "W3": (1.0, 1.5, 2.0),
}
