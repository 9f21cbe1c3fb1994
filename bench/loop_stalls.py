"""Event-loop stalls of a server under load: when, how long, and what its loop thread was doing.

A heartbeat runs on the loop every millisecond; a watchdog thread checks it every millisecond. When the
beat is late by more than the threshold, the watchdog samples the loop thread's stack (what it is
executing, or where it waits for the GIL) until the beat comes back. Each stall is kept with its start
(seconds since the watch began), its length and the stack frames seen most often during it, and
written as JSON lines when the watch stops.

    watch = StallWatch(threshold_ms=10)
    # inside the loop:  watch.start(asyncio.get_running_loop())
    ...
    watch.stop(Path("stalls.jsonl"))
"""

from __future__ import annotations

import asyncio
import collections
import json
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

BEAT_SECONDS = 0.001


@dataclass
class Stall:
    start: float
    length_ms: float = 0.0
    stacks: collections.Counter[str] = field(default_factory=collections.Counter)

    def as_json(self) -> dict[str, object]:
        return {
            "start_s": round(self.start, 3),
            "length_ms": round(self.length_ms, 1),
            "stacks": [{"samples": n, "stack": s} for s, n in self.stacks.most_common(3)],
        }


class StallWatch:
    def __init__(self, threshold_ms: float = 10.0) -> None:
        self.threshold = threshold_ms / 1000
        self.stalls: list[Stall] = []
        self.beats = 0
        self._last = time.monotonic()
        self._began = self._last
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop_thread = 0

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop_thread = threading.get_ident()
        self._began = self._last = time.monotonic()
        loop.call_soon(self._beat, loop)
        self._thread = threading.Thread(target=self._watch, name="stall-watch", daemon=True)
        self._thread.start()

    def _beat(self, loop: asyncio.AbstractEventLoop) -> None:
        self._last = time.monotonic()
        self.beats += 1
        if not self._stop.is_set():
            loop.call_later(BEAT_SECONDS, self._beat, loop)

    def _watch(self) -> None:
        current: Stall | None = None
        while not self._stop.wait(BEAT_SECONDS):
            now, last = time.monotonic(), self._last
            late = now - last
            if late > self.threshold:
                if current is None:
                    current = Stall(start=last - self._began)
                current.length_ms = late * 1000
                frame = sys._current_frames().get(self._loop_thread)
                if frame is not None:
                    lines = traceback.format_stack(frame, limit=12)
                    current.stacks["".join(line.split("\n")[0].strip() + "\n" for line in lines)] += 1
            elif current is not None:
                self.stalls.append(current)
                current = None

    def stop(self, out: Path) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1)
        with out.open("w") as handle:
            handle.write(json.dumps({"beats": self.beats, "seconds": time.monotonic() - self._began}) + "\n")
            for stall in self.stalls:
                handle.write(json.dumps(stall.as_json()) + "\n")


def summary(path: Path, *, top: int = 8) -> str:
    """The stalls file as lines: the count by length and the longest ones with their main frames."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    head, stalls = rows[0], rows[1:]
    lengths = sorted((s["length_ms"] for s in stalls), reverse=True)
    buckets = {"10-20 ms": 0, "20-50 ms": 0, "50-200 ms": 0, ">200 ms": 0}
    for length in lengths:
        key = (
            "10-20 ms"
            if length < 20
            else "20-50 ms"
            if length < 50
            else "50-200 ms"
            if length < 200
            else ">200 ms"
        )
        buckets[key] += 1
    out = [f"loop stalls over {head['seconds']:.0f} s: " + ", ".join(f"{k} {v}" for k, v in buckets.items())]
    for stall in sorted(stalls, key=lambda s: -s["length_ms"])[:top]:
        frames = stall["stacks"][0]["stack"].strip().splitlines()[-4:] if stall["stacks"] else []
        out.append(
            f"  at {stall['start_s']:.1f} s, {stall['length_ms']:.0f} ms: " + " <- ".join(reversed(frames))
        )
    return "\n".join(out)
