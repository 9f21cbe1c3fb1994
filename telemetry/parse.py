"""Engine ``/metrics`` exposition → one engine-neutral raw sample (PURE).

vLLM (``vllm:*``), SGLang (``sglang:*``), MindIE (no prefix) and the Mooncake master expose the same
ideas under different names; each known family is mapped onto one canonical field so everything after
this module is engine-neutral. Label sets of one family (data-parallel ``engine`` indices, ``tp_rank``,
``finished_reason``, ...) are summed (counters, histograms, counts) or averaged (ratios).

Lines of families we do not use (process_*, python_gc_*, ...) are dropped before parsing, and so are
labels we never read (``model_name``, ``engine``, ``tp_rank``...: label parsing is most of the parser's
cost); the remaining text is parsed by ``prometheus_client.parser``.
"""

from __future__ import annotations

import math
import re
from typing import TypedDict

from prometheus_client.parser import text_string_to_metric_families

from telemetry.families import (
    _KNOWN_BASES,
    _SUFFIXES,
    COUNTERS,
    GAUGES,
    HISTOGRAMS,
    HTTP_REQUESTS,
    INFERENCE_HANDLERS,
    INFO,
    MATCH_FIELD,
    MATCH_RATIO,
    MEAN_GAUGES,
    PROMPT_BY_SOURCE,
    PROMPT_SOURCES,
    REQUEST_SUCCESS_BY_REASON,
    ROUTER_REQUESTS,
    STORE_OPERATION,
    TENT_BYTES,
    TENT_FAILOVER,
)


class Histogram(TypedDict):
    """Cumulative buckets as (upper bound, count) sorted by bound (the last is +Inf), sum and count."""

    buckets: list[tuple[float, float]]
    sum: float
    count: float


class RawSample(TypedDict):
    engine: str  # vllm | sglang | mindie | mooncake-master | unknown
    ts: float
    counters: dict[str, float]
    gauges: dict[str, float]
    histograms: dict[str, Histogram]
    info: dict[str, str]


_NAME = re.compile(r"[^{\s]*")
_MEMO_LIMIT = 10_000  # distinct metric names / label blocks remembered (they repeat scrape after scrape)
_known: dict[str, bool] = {}
_reduced_labels: dict[str, str] = {}


def _metric_name(line: str) -> str:
    if line.startswith("#"):
        parts = line.split(None, 3)
        return parts[2] if len(parts) > 2 else ""
    match = _NAME.match(line)
    return match.group(0) if match else ""


def _is_known(name: str) -> bool:
    known = _known.get(name)
    if known is None:
        known = name in _KNOWN_BASES or any(
            name.endswith(suffix) and name[: -len(suffix)] in _KNOWN_BASES for suffix in _SUFFIXES
        )
        if len(_known) > _MEMO_LIMIT:
            _known.clear()
        _known[name] = known
    return known


_LABEL = re.compile(r'\s*([a-zA-Z_]\w*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
KEPT_LABELS = frozenset(
    {"le", "finished_reason", "operation", "status", "status_code", "handler"}
    | {"source", "transport", "from", "to"}  # prompt tokens by source, TENT transports
)


def _reduce_labels(block: str) -> str:
    """``model_name="m",engine="0",le="0.1"`` → ``{le="0.1"}`` (or nothing when no label is kept)."""
    reduced = _reduced_labels.get(block)
    if reduced is None:
        kept = ",".join(f'{m[1]}="{m[2]}"' for m in _LABEL.finditer(block) if m[1] in KEPT_LABELS)
        reduced = f"{{{kept}}}" if kept else ""
        if len(_reduced_labels) > _MEMO_LIMIT:
            _reduced_labels.clear()
        _reduced_labels[block] = reduced
    return reduced


def _strip_labels(line: str) -> str:
    start = line.find("{")
    if start == -1:
        return line
    end = line.rfind("}")
    if end < start:
        return line
    return f"{line[:start]}{_reduce_labels(line[start + 1 : end])}{line[end + 1 :]}"


def relevant_text(text: str) -> str:
    """Keep only the lines (and labels) Tandem reads, ending with a newline as the parser wants."""
    kept = []
    for line in text.splitlines():
        if not line or not _is_known(_metric_name(line)):
            continue
        kept.append(line if line.startswith(("#", INFO, MATCH_RATIO)) else _strip_labels(line))
    return "\n".join(kept) + "\n" if kept else ""


def detect_engine(names: set[str]) -> str:
    if any(name.startswith("vllm:") for name in names):
        return "vllm"
    if any(name.startswith("sglang:") for name in names):
        return "sglang"
    if any(name.startswith("master_") for name in names):
        return "mooncake-master"
    if names & {"npu_cache_usage_perc", "npu_prefix_cache_hit_rate", "num_requests_running"}:
        return "mindie"
    if ROUTER_REQUESTS in names:
        return "kthena-router"
    return "unknown"


# One parsed sample, classified: (kind, field, bucket bound, value, sample name, info labels).
COUNTER, GAUGE, BUCKET, SUM, COUNT, INFO_KIND = range(6)
Entry = tuple[int, str, float, float, str, tuple[tuple[str, str], ...]]
NO_LABELS: tuple[tuple[str, str], ...] = ()


def status_field(prefix: str, status: str) -> str:
    """``http_2xx`` / ``http_4xx`` / ``http_429`` / ``http_5xx`` (``router_...``) for a status label that is a
    code (``"503"``) or a class (``"5xx"``); 429 is kept apart when the code is known (back-pressure). A
    ``"4xx"`` class (real vLLM groups statuses so) is ``http_4xx_class``: a 429 may be among them."""
    status = status.strip().lower()
    if status == "429":
        return f"{prefix}_429"
    head = status[:1]
    if head == "4" and status.endswith("xx"):
        return f"{prefix}_4xx_class"
    return f"{prefix}_{head}xx" if head in ("1", "2", "3", "4", "5") else f"{prefix}_other"


# vLLM's ``finished_reason`` values that are failures: the client went away or the request was aborted
# (``abort``), the engine failed it (``error``: an internal error, answered 500).
FAILED_REASONS = {"abort": "req_aborted", "error": "req_errored"}


def classify(name: str, labels: dict[str, str], value: float) -> tuple[Entry, ...]:
    """What one sample contributes (nothing for families we do not read)."""
    if math.isnan(value):
        return ()
    if name == REQUEST_SUCCESS_BY_REASON:
        field = FAILED_REASONS.get(labels.get("finished_reason", ""), "req_success")
        return ((COUNTER, field, 0.0, value, name, NO_LABELS),)
    if name == HTTP_REQUESTS:
        if labels.get("handler") not in INFERENCE_HANDLERS:
            return ()
        return ((COUNTER, status_field("http", labels.get("status", "")), 0.0, value, name, NO_LABELS),)
    if name == ROUTER_REQUESTS:
        return (
            (COUNTER, status_field("router", labels.get("status_code", "")), 0.0, value, name, NO_LABELS),
        )
    if name in COUNTERS:
        return ((COUNTER, COUNTERS[name], 0.0, value, name, NO_LABELS),)
    if name == PROMPT_BY_SOURCE:
        source = PROMPT_SOURCES.get(labels.get("source", ""))
        return ((COUNTER, source, 0.0, value, name, NO_LABELS),) if source else ()
    if name == TENT_FAILOVER:
        pair = f"{_transport(labels.get('from'))}_to_{_transport(labels.get('to'))}"
        return ((COUNTER, f"tent_failover_{pair}", 0.0, value, name, NO_LABELS),)
    if name in TENT_BYTES:
        field = f"tent_bytes_{_transport(labels.get('transport'))}"
        return ((COUNTER, field, 0.0, value, name, NO_LABELS),)
    if name in GAUGES:
        return ((GAUGE, GAUGES[name], 0.0, value, name, NO_LABELS),)
    if name == INFO:
        kept = tuple((k, v) for k, v in labels.items() if k not in ("model_name", "engine"))
        return ((INFO_KIND, "", 0.0, value, name, kept),)
    base, _, part = name.rpartition("_")
    if base == MATCH_RATIO:
        field = MATCH_FIELD + labels.get("model", "")
    elif base in HISTOGRAMS:
        field = HISTOGRAMS[base]
    else:
        return ()
    if part == "bucket":
        return ((BUCKET, field, float(labels.get("le", "inf")), value, name, NO_LABELS),)
    if part == "sum":
        return ((SUM, field, 0.0, value, name, NO_LABELS),)
    if part != "count":
        return ()
    entry: Entry = (COUNT, field, 0.0, value, name, NO_LABELS)
    if base == STORE_OPERATION and labels.get("status", "success") not in ("success", "ok"):
        return (entry, (COUNTER, "store_op_failed", 0.0, value, name, NO_LABELS))
    return (entry,)


def _transport(value: str | None) -> str:
    """A TENT transport label as a field-name part (its values are a closed set of short words)."""
    text = (value or "unspec").strip().lower()
    return text if text.replace("_", "").isalnum() else "other"


def _parse_lines(lines: list[str]) -> list[tuple[str, dict[str, str], float]]:
    """Parse sample lines with ``prometheus_client``: exactly one sample per line, in order."""
    text = "\n".join(lines) + "\n"
    samples = [
        (sample.name, sample.labels, float(sample.value))
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]
    if len(samples) != len(lines):
        raise ValueError(f"{len(lines)} sample lines gave {len(samples)} samples")
    return samples


def _parse_values(lines: list[str]) -> list[float]:
    """Parse label-free ``v <value> [<timestamp>]`` lines with ``prometheus_client``, in order."""
    return [sample[2] for sample in _parse_lines(lines)]


_MISSING = object()
# series key (the line up to its value: name and labels) -> the same key with only the labels we read,
# or None for a family we do not read; shared by every target (keys repeat scrape after scrape)
_series: dict[str, str | None] = {}
# reduced series key -> (name, labels) as prometheus_client parsed them the first time the key was seen;
# later lines of that key only need their value parsed
_series_sample: dict[str, tuple[str, dict[str, str]]] = {}


def _series_key(line: str) -> str:
    brace = line.rfind("}")
    if brace != -1 and line.find("{") != -1:
        return line[: brace + 1]
    space = line.find(" ")
    return line if space == -1 else line[:space]


def _reduced_key(key: str) -> str | None:
    reduced = _series.get(key, _MISSING)
    if reduced is _MISSING:
        name = _metric_name(key)
        if name.endswith("_created") or not _is_known(name):
            reduced = None
        else:
            reduced = key if name == INFO or name.startswith(MATCH_RATIO) else _strip_labels(key)
        if len(_series) > _MEMO_LIMIT * 10:
            _series.clear()
        _series[key] = reduced
    return reduced  # type: ignore[return-value]


def _plain_value(rest: str) -> float | None:
    """The value of ``<value> [<timestamp>]`` when it is a plain number (as ``prometheus_client``
    reads it), else None so the line goes through the parser (and its errors)."""
    parts = rest.split()
    if not 0 < len(parts) <= 2 or "_" in parts[0] or "#" in rest:
        return None
    try:
        return float(parts[0])
    except ValueError:
        return None


# One block of an exposition (a family from its ``# HELP`` line on): its text, what its samples
# contribute, and the per-line memory of that block.
_Block = tuple[str, tuple[Entry, ...], dict[str, tuple[Entry, ...]]]
_HELP = "\n# HELP "


class LineParser:
    """Parses the expositions of ONE target, re-using whatever did not change since its previous
    scrape: a whole exposition, then a family block (from one ``# HELP`` line to the next: help/type
    lines, idle gauges, histograms and counters that did not move), then a line. Only new lines are
    parsed — and for a series whose name and labels the parser has already read, only the new value
    is read. Keeps just the previous scrape's blocks."""

    def __init__(self) -> None:
        self._text: str | None = None
        self._blocks: dict[str, _Block] = {}
        self._last: RawSample | None = None

    def parse(self, text: str, *, ts: float) -> RawSample:
        """Raises ``ValueError`` when the text is not Prometheus text format."""
        if text == self._text and self._last is not None:  # an idle target
            self._last = RawSample(**{**self._last, "ts": ts})
            return self._last
        previous = self._blocks
        blocks: dict[str, _Block] = {}
        entries: list[Entry] = []
        parts = text.split(_HELP)
        changed = len(parts) != len(previous)
        for index, part in enumerate(parts):
            newline = part.find("\n")
            head = part if newline == -1 else part[:newline]
            key = head if index else "\0" + head  # the first block has no "# HELP " cut off
            before = previous.get(key)
            if before is not None and before[0] == part:
                blocks[key] = before
                entries.extend(before[1])
                continue
            changed = True
            lines = part.splitlines()
            found, memory = _parse_block(lines[1:] if index else lines, before[2] if before else {})
            blocks[key] = (part, found, memory)
            entries.extend(found)
        self._blocks = blocks
        if not changed and self._last is not None:  # only unread lines moved (process_*, _created)
            self._last = RawSample(**{**self._last, "ts": ts})
        else:
            self._last = aggregate(entries, ts=ts)
        self._text = text  # only once parsed: a malformed text is never taken as known
        return self._last


def _parse_block(
    lines: list[str], previous: dict[str, tuple[Entry, ...]]
) -> tuple[tuple[Entry, ...], dict[str, tuple[Entry, ...]]]:
    """The entries of one block's lines, and its line memory (line -> entries) for the next scrape."""
    current: dict[str, tuple[Entry, ...]] = {}
    entries: list[Entry] = []
    raw_lines: list[str] = []
    reduced: list[str] = []
    shorts: list[str] = []
    value_lines: list[tuple[str, str, str]] = []
    for line in lines:
        if not line:
            continue
        hit = previous.get(line)
        if hit is not None:
            current[line] = hit
            entries.extend(hit)
            continue
        if line[0] == "#":
            current[line] = ()
            continue
        key = _series_key(line)
        short = _reduced_key(key)
        if short is None:
            current[line] = ()
            continue
        known = _series_sample.get(short)
        if known is None:
            raw_lines.append(line)
            shorts.append(short)
            reduced.append(short + line[len(key) :])
            continue
        value = _plain_value(line[len(key) :])
        if value is None:
            value_lines.append((line, short, "v" + line[len(key) :]))
            continue
        found = classify(known[0], known[1], value)
        current[line] = found
        entries.extend(found)
    if reduced:
        parsed = _parse_lines(reduced)
        if len(_series_sample) > _MEMO_LIMIT * 10:
            _series_sample.clear()
        for line, short, (name, labels, value) in zip(raw_lines, shorts, parsed, strict=True):
            _series_sample[short] = (name, labels)
            found = classify(name, labels, value)
            current[line] = found
            entries.extend(found)
    if value_lines:
        values = _parse_values([text for _, _, text in value_lines])
        for (line, short, _), value in zip(value_lines, values, strict=True):
            name, labels = _series_sample.get(short) or _parse_lines([short + " 0"])[0][:2]
            found = classify(name, labels, value)
            current[line] = found
            entries.extend(found)
    return tuple(entries), current


def parse_metrics(text: str, *, ts: float) -> RawSample:
    """Parse one exposition (no memory of earlier ones). Raises ``ValueError`` on malformed text."""
    return LineParser().parse(text, ts=ts)


def aggregate(entries: list[Entry], *, ts: float) -> RawSample:
    """Classified samples → canonical counters, gauges, histograms and info labels."""
    counters: dict[str, float] = {}
    gauges: dict[str, float] = {}
    gauge_n: dict[str, int] = {}
    hist_buckets: dict[str, dict[float, float]] = {}
    hist_sum: dict[str, float] = {}
    hist_count: dict[str, float] = {}
    info: dict[str, str] = {}
    names: set[str] = set()
    for kind, field, le, value, name, labels in entries:
        names.add(name)
        if kind == BUCKET:
            buckets = hist_buckets.get(field)
            if buckets is None:
                buckets = hist_buckets[field] = {}
            buckets[le] = buckets.get(le, 0.0) + value
        elif kind == COUNTER:
            counters[field] = counters.get(field, 0.0) + value
        elif kind == GAUGE:
            gauges[field] = gauges.get(field, 0.0) + value
            gauge_n[field] = gauge_n.get(field, 0) + 1
        elif kind == SUM:
            hist_sum[field] = hist_sum.get(field, 0.0) + value
        elif kind == COUNT:
            hist_count[field] = hist_count.get(field, 0.0) + value
        else:
            info.update(labels)
    for field, count in gauge_n.items():
        if field in MEAN_GAUGES and count > 1:
            gauges[field] /= count
    histograms: dict[str, Histogram] = {}
    for field in set(hist_buckets) | set(hist_count):
        ordered = sorted(hist_buckets.get(field, {}).items())
        total = hist_count.get(field, ordered[-1][1] if ordered else 0.0)
        if not ordered or not math.isinf(ordered[-1][0]):
            ordered.append((math.inf, total))
        histograms[field] = Histogram(buckets=ordered, sum=hist_sum.get(field, 0.0), count=total)
    return RawSample(
        engine=detect_engine(names),
        ts=ts,
        counters=counters,
        gauges=gauges,
        histograms=histograms,
        info=info,
    )
