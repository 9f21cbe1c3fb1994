"""The rebalancing benchmark's held-out workloads: fixed here, before any planner setting was run on
them, and never used to choose one (bench/rebalance_fair.py scores them; docs/rebalancing-bench.md).

- H1 bursty agentic: agents run tool-call loops. Bursts of sessions arrive (a burst every 8 s on
  average, 12 sessions per burst on average, × scale); a session is 3 to 6 turns. Its first turn is one
  of 4 agents' 3072-token system and tool prompts plus a 300-700-token task; each later turn resends the
  whole conversation (cached on the prefill that served the turn before) plus the tool's output
  (400-1200 tokens) after a tool latency of 0.5-3 s; a turn answers with a tool call (40-120 tokens), the
  last with the final answer (200-500 tokens). A session ends early before its prompt passes 8000 tokens.
- H2 diurnal: one compressed day over the run. The rate goes 2 → 8 → 2 req/s (× scale), peaking mid-run,
  and the mix drifts across the day: the share of document requests (ISL≈6k / OSL≈150) falls from 70 %
  in the morning to 20 % in the evening, the rest being chat (ISL≈800 / OSL≈600, one of 8 system
  prompts of 512 tokens).
"""

from __future__ import annotations

import math
import random

from perfmodel.sim.types import SimRequest

AGENTS = 4
AGENT_PREFIX = 3072
MAX_PROMPT = 8000
CHAT_PROMPTS = 8


def h1(scale: float, duration: float, seed: int = 11) -> list[SimRequest]:
    """Bursty agentic tool-call loops (see the module's docstring), × scale on the burst size."""
    rng = random.Random(seed)
    out: list[SimRequest] = []
    session = 0
    t = rng.expovariate(1 / 8.0)
    while t < duration:
        sessions = max(1, round(rng.gauss(12, 3) * scale))
        for _ in range(sessions):
            session += 1
            at = t + rng.uniform(0.0, 1.0)
            agent = rng.randrange(AGENTS)
            prompt = AGENT_PREFIX + rng.randint(300, 700)
            turns = rng.randint(3, 6)
            previous = 0
            for turn in range(turns):
                last = turn == turns - 1 or prompt + 1200 + 500 > MAX_PROMPT
                output = rng.randint(200, 500) if last else rng.randint(40, 120)
                if turn == 0:  # the agent's system and tool prompt, shared by its sessions
                    prefix, shared = agent, AGENT_PREFIX
                else:  # the conversation so far, cached where the turn before was served
                    prefix, shared = 1000 + session, previous
                if at < duration:
                    out.append(SimRequest(at, prompt, output, prefix=prefix, prefix_len=shared, kind="agent"))
                if last:
                    break
                previous = prompt + output
                # the tool runs, then the agent resends everything with the tool's output
                at += output * 0.03 + rng.uniform(0.5, 3.0)
                prompt = previous + rng.randint(400, 1200)
        t += rng.expovariate(1 / 8.0)
    out.sort(key=lambda r: r.at)
    return out


def h2_rate(t: float, duration: float, scale: float) -> float:
    return scale * (2.0 + 6.0 * (0.5 - 0.5 * math.cos(2 * math.pi * t / duration)))


def h2_doc_share(t: float, duration: float) -> float:
    return 0.7 - 0.5 * t / duration


def h2(scale: float, duration: float, seed: int = 12) -> list[SimRequest]:
    """A compressed day (see the module's docstring): Poisson arrivals thinned to the day's rate."""
    rng = random.Random(seed)
    out: list[SimRequest] = []
    peak = 8.0 * scale
    t = 0.0
    while True:
        t += rng.expovariate(peak)
        if t >= duration:
            break
        if rng.random() > h2_rate(t, duration, scale) / peak:
            continue
        if rng.random() < h2_doc_share(t, duration):
            out.append(SimRequest(t, int(rng.gauss(6000, 500)), max(2, int(rng.gauss(150, 30))), kind="doc"))
        else:
            out.append(
                SimRequest(
                    t,
                    max(600, int(rng.gauss(800, 150))),
                    max(2, int(rng.gauss(600, 100))),
                    prefix=rng.randrange(CHAT_PROMPTS),
                    prefix_len=512,
                    kind="chat",
                )
            )
    return out


HELD_OUT = {"H1": h1, "H2": h2}
SCALES = {
    "H1": (0.5, 1.0, 1.5, 2.0, 3.0),
    "H2": (0.5, 1.0, 1.5, 2.0, 3.0),
}
