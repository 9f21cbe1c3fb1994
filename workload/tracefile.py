"""Request traces for replay: Tandem's own JSONL, Mooncake's JSONL and Azure's CSV, read and written purely.

A trace is the arrival time (ms from the trace's start), prompt tokens, output tokens and prefix group
of each request. Formats (docs/hit-rate.md, "Trace files"):

- Tandem: a header line ``{"format": "tandem-trace", "version": 1, ...}`` then one line per request
  ``{"arrival_ms": 0, "prompt_tokens": 812, "output_tokens": 64, "prefix_group": "9f2c..."}``.
- Mooncake (kvcache-ai/Mooncake, FAST25-release/README.md): ``{"timestamp": <ms>, "input_length": n,
  "output_length": n, "hash_ids": [...]}``; the group is the hash of the first block's id (blocks of 512
  tokens, so requests that share their first block share a prefix).
- Azure LLM inference traces (Azure/AzurePublicDataset, AzureLLMInferenceDataset2023.md): CSV with
  header ``TIMESTAMP,ContextTokens,GeneratedTokens``, the timestamp ``2023-11-16 18:17:03.9799600``; no
  prefix information (group "").

A bad line raises `TraceError` naming the line and the field.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime
from hashlib import blake2b
from typing import Any

MAX_TRACE_BYTES = 32 * 1024 * 1024
MAX_REQUESTS = 1_000_000
MAX_TOKENS = 10_000_000
FORMATS = ("tandem", "mooncake", "azure")
AZURE_HEADER = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"]


@dataclass(frozen=True)
class TraceRequest:
    arrival_ms: int
    prompt_tokens: int
    output_tokens: int
    prefix_group: str = ""


class TraceError(ValueError):
    def __init__(self, line: int, field: str, message: str) -> None:
        super().__init__(f"line {line}, {field}: {message}")
        self.line = line
        self.field = field
        self.message = message


def export_jsonl(requests: Iterable[TraceRequest], header: dict[str, Any]) -> str:
    """Tandem's format: the header line, then one request a line in arrival order."""
    lines = [json.dumps({"format": "tandem-trace", "version": 1, **header}, separators=(",", ":"))]
    lines += [json.dumps(asdict(r), separators=(",", ":")) for r in requests]
    return "\n".join(lines) + "\n"


def detect(text: str) -> str:
    first = text.lstrip("\ufeff").lstrip()[:200]
    if first.startswith("TIMESTAMP"):
        return "azure"
    head = first.split("\n", 1)[0]
    if '"tandem-trace"' in head:
        return "tandem"
    if '"input_length"' in head or '"hash_ids"' in head:
        return "mooncake"
    raise TraceError(
        1,
        "format",
        "not a known trace: expected Tandem's header line, Mooncake's JSONL or Azure's CSV header",
    )


def _int(value: Any, line: int, field: str, *, top: int = MAX_TOKENS) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise TraceError(line, field, f"must be a whole number, got {value!r}")
    if not 0 <= value <= top:
        raise TraceError(line, field, f"must be between 0 and {top}, got {value}")
    return int(value)


def _object(raw: str, line: int) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as error:
        raise TraceError(line, "json", f"not valid JSON ({error.msg} at column {error.colno})") from None
    if not isinstance(value, dict):
        raise TraceError(line, "json", "each line must be a JSON object")
    return value


def _need(row: dict[str, Any], field: str, line: int) -> Any:
    if field not in row:
        raise TraceError(line, field, "missing")
    return row[field]


def _group_of_blocks(hash_ids: Any, line: int) -> str:
    if not isinstance(hash_ids, list) or not all(
        isinstance(h, int) and not isinstance(h, bool) for h in hash_ids
    ):
        raise TraceError(line, "hash_ids", "must be a list of whole numbers")
    if not hash_ids:
        return ""
    return blake2b(f"mooncake:{hash_ids[0]}".encode(), digest_size=8).hexdigest()


def _lines(text: str) -> Iterable[tuple[int, str]]:
    for number, raw in enumerate(text.splitlines(), start=1):
        if raw.strip():
            yield number, raw


def _bounded(found: list[TraceRequest], line: int) -> None:
    if len(found) >= MAX_REQUESTS:
        raise TraceError(line, "requests", f"a trace holds at most {MAX_REQUESTS} requests; cut the file")


def parse_tandem(text: str) -> list[TraceRequest]:
    found: list[TraceRequest] = []
    rows = iter(_lines(text))
    first = next(rows, None)
    if first is None or _object(first[1], first[0]).get("format") != "tandem-trace":
        raise TraceError(
            first[0] if first else 1, "format", 'the first line must be {"format": "tandem-trace", ...}'
        )
    header = _object(first[1], first[0])
    if header.get("version") != 1:
        raise TraceError(first[0], "version", f"only version 1 is read, got {header.get('version')!r}")
    last = 0
    for line, raw in rows:
        _bounded(found, line)
        row = _object(raw, line)
        arrival = _int(_need(row, "arrival_ms", line), line, "arrival_ms", top=2**53)
        if arrival < last:
            raise TraceError(
                line, "arrival_ms", f"arrivals must not go back in time ({arrival} after {last})"
            )
        last = arrival
        group = row.get("prefix_group", "")
        if not isinstance(group, str) or len(group) > 64:
            raise TraceError(line, "prefix_group", "must be a string of at most 64 characters")
        found.append(
            TraceRequest(
                arrival,
                _int(_need(row, "prompt_tokens", line), line, "prompt_tokens"),
                _int(_need(row, "output_tokens", line), line, "output_tokens"),
                group,
            )
        )
    return found


def parse_mooncake(text: str) -> list[TraceRequest]:
    found: list[TraceRequest] = []
    for line, raw in _lines(text):
        _bounded(found, line)
        row = _object(raw, line)
        found.append(
            TraceRequest(
                _int(_need(row, "timestamp", line), line, "timestamp", top=2**53),
                _int(_need(row, "input_length", line), line, "input_length"),
                _int(_need(row, "output_length", line), line, "output_length"),
                _group_of_blocks(row.get("hash_ids", []), line),
            )
        )
    return _from_zero(found)


def _azure_time(value: str, line: int) -> datetime:
    stamp = value.strip()
    whole, _, fraction = stamp.partition(".")
    try:
        moment = datetime.strptime(whole, "%Y-%m-%d %H:%M:%S")
        micros = int((fraction + "000000")[:6]) if fraction else 0
    except ValueError:
        raise TraceError(
            line, "TIMESTAMP", f"expected like 2023-11-16 18:17:03.9799600, got {value!r}"
        ) from None
    return moment.replace(microsecond=micros)


def parse_azure(text: str) -> list[TraceRequest]:
    reader = csv.reader(text.lstrip("\ufeff").splitlines())
    header = next(reader, None)
    if header is None or [h.strip() for h in header] != AZURE_HEADER:
        raise TraceError(1, "header", f"the first line must be {','.join(AZURE_HEADER)}")
    found: list[TraceRequest] = []
    first: datetime | None = None
    for line, row in enumerate(reader, start=2):
        if not row:
            continue
        _bounded(found, line)
        if len(row) != 3:
            raise TraceError(line, "columns", f"expected 3 columns, got {len(row)}")
        moment = _azure_time(row[0], line)
        first = first or moment
        numbers = []
        for field, value in zip(AZURE_HEADER[1:], row[1:], strict=True):
            try:
                numbers.append(_int(int(value), line, field))
            except ValueError:
                raise TraceError(line, field, f"must be a whole number, got {value!r}") from None
        arrival = round((moment - first).total_seconds() * 1000)
        if arrival < 0:
            raise TraceError(line, "TIMESTAMP", "arrivals must not go back in time")
        found.append(TraceRequest(arrival, numbers[0], numbers[1], ""))
    return found


def _from_zero(found: list[TraceRequest]) -> list[TraceRequest]:
    found.sort(key=lambda r: r.arrival_ms)
    start = found[0].arrival_ms if found else 0
    return [
        TraceRequest(r.arrival_ms - start, r.prompt_tokens, r.output_tokens, r.prefix_group) for r in found
    ]


def parse(text: str, format: str = "") -> tuple[str, list[TraceRequest]]:
    """The format (given, else detected) and the requests, arrivals from 0; `TraceError` on a bad line."""
    if len(text.encode("utf-8", "replace")) > MAX_TRACE_BYTES:
        raise TraceError(0, "file", f"a trace file is at most {MAX_TRACE_BYTES // 1048576} MiB; cut it")
    chosen = format or detect(text)
    if chosen not in FORMATS:
        raise TraceError(0, "format", f"one of {', '.join(FORMATS)}, got {chosen!r}")
    reader = {"tandem": parse_tandem, "mooncake": parse_mooncake, "azure": parse_azure}[chosen]
    found = reader(text)
    if not found:
        raise TraceError(0, "requests", "the trace holds no request")
    return chosen, found
