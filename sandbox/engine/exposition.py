"""Prometheus text exposition, written by hand: small per-engine state, fast to render for 200 engines.

The output is what `prometheus_client.generate_latest` writes (HELP/TYPE lines, counters with
`_total`, histograms as `_bucket{le=...}`/`_count`/`_sum`), without the `_created` samples.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence


def format_labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    return repr(float(value))


class Histogram:
    """Cumulative-on-render histogram: `counts[i]` holds observations in bucket i (non-cumulative)."""

    __slots__ = ("buckets", "count", "counts", "total")

    def __init__(self, buckets: Sequence[float]) -> None:
        self.buckets = tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)
        self.count = 0
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.count += 1
        self.total += value

    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0


class Writer:
    """Accumulates exposition lines for one scrape."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")

    def gauge(self, name: str, help_text: str, samples: Iterable[tuple[Mapping[str, str], float]]) -> None:
        self.family(name, "gauge", help_text)
        for labels, value in samples:
            self.lines.append(f"{name}{format_labels(labels)} {_num(value)}")

    def counter(self, name: str, help_text: str, samples: Iterable[tuple[Mapping[str, str], float]]) -> None:
        """`name` is the family name without `_total`."""
        self.family(f"{name}_total", "counter", help_text)
        for labels, value in samples:
            self.lines.append(f"{name}_total{format_labels(labels)} {_num(value)}")

    def histogram(
        self, name: str, help_text: str, samples: Iterable[tuple[Mapping[str, str], Histogram]]
    ) -> None:
        self.family(name, "histogram", help_text)
        for labels, hist in samples:
            cumulative = 0
            for bound, count in zip((*hist.buckets, float("inf")), hist.counts, strict=True):
                cumulative += count
                bucket_labels = {**labels, "le": _num(bound)}
                self.lines.append(f"{name}_bucket{format_labels(bucket_labels)} {_num(cumulative)}")
            self.lines.append(f"{name}_count{format_labels(labels)} {_num(hist.count)}")
            self.lines.append(f"{name}_sum{format_labels(labels)} {_num(hist.total)}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
