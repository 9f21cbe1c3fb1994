"""After a spike of requests in flight has passed, the gateway gives the freed heap back (gateway.memory)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from gateway.memory import SPIKE, Spikes, _libc_trim


def test_no_spike_no_trim() -> None:
    spikes = Spikes()
    for _ in range(SPIKE - 1):
        spikes.enter()
    for _ in range(SPIKE - 1):
        spikes.leave()
    assert not spikes.passed()  # steady traffic below the spike size never trims


def test_a_spike_is_trimmed_once_it_falls_to_a_quarter_and_then_not_again() -> None:
    spikes = Spikes()
    for _ in range(SPIKE * 2):
        spikes.enter()
    assert not spikes.passed()  # still at its peak
    for _ in range(SPIKE):
        spikes.leave()
    assert not spikes.passed()  # half of the peak: not yet
    for _ in range(SPIKE // 2):
        spikes.leave()
    assert spikes.passed()  # a quarter of the peak
    spikes.trimmed()
    assert spikes.peak == SPIKE // 2
    assert not spikes.passed()  # the next check does not trim again without a new spike


def test_trim_returns_the_freed_heap_of_a_fragmented_spike() -> None:
    """A child process fills its heap with small objects, frees all but a few scattered ones (what the
    requests of a stall leave), and trims: its resident memory drops by most of what was freed."""
    assert _libc_trim() is not None, "this machine's C library is glibc"
    child = textwrap.dedent(
        """
        import gc
        from gateway.memory import _libc_trim

        def rss_mb():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * 4096 / 2**20

        blocks = [bytearray(600) for _ in range(300_000)]  # ~190 MB of small heap blocks
        keep = blocks[::4096]  # a few survive, scattered through the heap
        del blocks
        gc.collect()
        before = rss_mb()
        _libc_trim()()
        print(before, rss_mb())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=60, check=True
    )
    before, after = map(float, out.stdout.split())
    assert before - after > 50, (before, after)
