"""The verification run's P/D data-path check: is the KV cache really travelling from prefill to decode?

A P/D topology whose decode pods prefill every prompt again answers every request correctly; only the
engines' own counters tell (``telemetry.datapath``). The check sends a few long prompts, each with a
prefix nobody cached, waits for the telemetry collection that covers them, and fails naming every
silent data-path problem that collection found (silent prefill recompute, KV expiry, transfers failing
without request errors, transport fallback). ``judge_pd`` is pure.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

from gateway import inprocess
from gateway.routes import RouteEntry

PD_REQUESTS = 4
PD_WORDS = 400  # about 800 tokens: several whole KV blocks move for each prompt
STALE_INTERVALS = 3  # a snapshot older than this many collection intervals is not evidence
WAIT_INTERVALS = 3  # how long to wait for a collection that covers the check's requests


def judge_pd(
    snapshot: dict[str, Any] | None, now: float, since: float | None = None
) -> tuple[bool, str, list[str]]:
    """(passed, summary, diagnosis) from the latest snapshot; ``since``: the check's requests had
    finished then, so a snapshot collected before it says nothing about them."""
    if snapshot is None:
        return (
            False,
            "no telemetry for this topology",
            ["Telemetry has not collected it yet: is it deployed?"],
        )
    interval = float(snapshot.get("interval_s") or 2.0)
    ts = float(snapshot.get("ts") or 0.0)
    if now - ts > STALE_INTERVALS * interval or (since is not None and ts < since):
        return (
            False,
            f"no telemetry collected after the check's requests (last {now - ts:.0f} s ago)",
            ["Check that the Celery worker and beat run: the data path is judged from engine counters."],
        )
    if "decode" not in (snapshot.get("roles") or {}):
        return True, "not a P/D topology: no KV cache travels between roles", []
    health = snapshot.get("health") or {}
    found = list(health.get("problems") or [])
    if not found:
        return (
            True,
            "the KV cache travels: decode pods received their prompts' KV, nothing expired or fell back",
            [],
        )
    names = ", ".join(str(p.get("name")) for p in found)
    diagnosis = [
        f"{p.get('name')}: {p.get('detail')}. Costs {p.get('cost')}. Check {p.get('check')}." for p in found
    ]
    return False, names, diagnosis


async def _snapshot_after(topology_id: int, since: float, interval: float) -> dict[str, Any] | None:
    from asgiref.sync import sync_to_async

    from telemetry.selectors import latest_snapshot

    deadline = time.monotonic() + WAIT_INTERVALS * interval
    while True:
        snapshot = await sync_to_async(latest_snapshot)(topology_id=topology_id)
        if snapshot is not None and float(snapshot.get("ts") or 0.0) >= since:
            return dict(snapshot)
        if time.monotonic() >= deadline:
            return dict(snapshot) if snapshot is not None else None
        await asyncio.sleep(min(0.25, interval / 4))


async def pd(entry: RouteEntry) -> tuple[bool, str, dict[str, Any], list[str]]:
    """Long prompts through the topology, then what the next collection says about its data path."""
    from django.conf import settings

    from gateway.probes import WORDS, explain_failure

    for n in range(PD_REQUESTS):
        salt = secrets.token_hex(4)  # no prefix cache anywhere holds it: every token must travel
        prompt = " ".join(f"{WORDS[i % len(WORDS)]}-{salt}" for i in range(PD_WORDS))
        answer = await inprocess.chat(
            entry, [{"role": "user", "content": f"{prompt}\n\nSummarise."}], max_tokens=2
        )
        if answer.status != 200:
            return False, f"request {n + 1} failed ({answer.status})", {}, explain_failure(answer)
    interval = float(settings.TELEMETRY_INTERVAL_SECONDS)
    done = time.time()  # a collection after this has scraped the counters the requests moved
    snapshot = await _snapshot_after(entry.topology_id, done, interval)
    ok, summary, diagnosis = judge_pd(snapshot, time.time(), done)
    problems = list(((snapshot or {}).get("health") or {}).get("problems") or [])
    figures = {
        "requests": PD_REQUESTS,
        "prompt_words": PD_WORDS,
        "problems": [p.get("key") for p in problems],
    }
    return ok, summary, figures, diagnosis
