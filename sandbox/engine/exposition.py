"""Prometheus text exposition, written by hand: small per-engine state, fast to render for 200 engines.

The output is what `prometheus_client.generate_latest` writes (HELP/TYPE lines, counters with
`_total`, histograms as `_bucket{le=...}`/`_count`/`_sum`), without the `_created` samples.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache

from perfmodel.model.stats import Histogram

LabelKey = tuple[tuple[str, str], ...]


def format_labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


@lru_cache(maxsize=16384)
def _series(name: str, labels: LabelKey) -> str:
    return name + format_labels(dict(labels))


@lru_cache(maxsize=4096)
def _bucket_series(name: str, labels: LabelKey, buckets: tuple[float, ...]) -> tuple[str, ...]:
    bucket = name + "_bucket"
    return tuple(
        bucket + format_labels({**dict(labels), "le": _num(bound)}) + " "
        for bound in (*buckets, float("inf"))
    )


def _num(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    return repr(float(value))


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
            self.lines.append(f"{_series(name, tuple(labels.items()))} {_num(value)}")

    def counter(self, name: str, help_text: str, samples: Iterable[tuple[Mapping[str, str], float]]) -> None:
        """`name` is the family name without `_total`."""
        self.family(f"{name}_total", "counter", help_text)
        total = f"{name}_total"
        for labels, value in samples:
            self.lines.append(f"{_series(total, tuple(labels.items()))} {_num(value)}")

    def histogram(
        self, name: str, help_text: str, samples: Iterable[tuple[Mapping[str, str], Histogram]]
    ) -> None:
        self.family(name, "histogram", help_text)
        lines = self.lines
        for labels, hist in samples:
            key = tuple(labels.items())
            cumulative = 0
            for prefix, count in zip(_bucket_series(name, key, hist.buckets), hist.counts, strict=True):
                cumulative += count
                lines.append(f"{prefix}{cumulative}.0")
            lines.append(f"{_series(name + '_count', key)} {hist.count}.0")
            lines.append(f"{_series(name + '_sum', key)} {_num(hist.total)}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
