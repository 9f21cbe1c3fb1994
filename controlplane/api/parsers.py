"""JSON request bodies, read with limits: size, nesting depth, and characters PostgreSQL cannot store.

Python's decoder recurses once per nesting level, and so do the serializers and validators that walk
the result afterwards: a 2 KB body nested 1,000 deep used to end in a ``RecursionError`` (a 500).
Every JSON body the API reads goes through ``loads_limited``: it refuses bodies over
``DATA_UPLOAD_MAX_MEMORY_SIZE``, anything nested deeper than ``MAX_JSON_DEPTH``, NaN/Infinity, NUL
characters and lone surrogates, each with a 400 that says what to change. ``DepthLimitedJSONParser`` is DRF's
default JSON parser (``REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]``); any other view that reads JSON
calls ``loads_limited`` directly.
"""

from __future__ import annotations

import json
import re
from typing import IO, Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

#: Deepest nesting of objects/arrays accepted in a body; Tandem's own shapes use at most 6 levels.
MAX_JSON_DEPTH = 32
_SURROGATE = re.compile("[\ud800-\udfff]")


class JSONBodyError(ValueError):
    """A body that is not acceptable JSON; the message says what is wrong and how to fix it."""


def _constant(name: str) -> Any:
    raise JSONBodyError(f"{name} is not a JSON number; send a finite number or null")


def json_depth_problem(value: Any, limit: int = MAX_JSON_DEPTH) -> str | None:
    """Walk a decoded value without recursion; return what is wrong with it, or None."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth > limit:
                return f"the JSON is nested deeper than {limit} levels; flatten it"
            for key, child in item.items():
                stack.append((key, depth))
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            if depth > limit:
                return f"the JSON is nested deeper than {limit} levels; flatten it"
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str):
            if "\x00" in item:
                return "a JSON string contains a NUL character (\\u0000); remove it"
            if _SURROGATE.search(item):
                return "a JSON string holds a lone surrogate (\\ud800-\\udfff), not UTF-8 text; remove it"
    return None


def loads_limited(raw: bytes | str, *, max_bytes: int | None = None, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Decode a JSON body within Tandem's limits, or raise ``JSONBodyError`` naming the problem."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE if max_bytes is None else max_bytes
    if limit is not None and len(raw) > limit:
        raise JSONBodyError(f"the body is larger than {limit} bytes; send a smaller one")
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        raise JSONBodyError("the body is not UTF-8 text; send JSON encoded as UTF-8") from None
    try:
        value = json.loads(text, parse_constant=_constant)
    except RecursionError:
        raise JSONBodyError(f"the JSON is nested deeper than {max_depth} levels; flatten it") from None
    except JSONBodyError:
        raise
    except ValueError as exc:  # JSONDecodeError, and ints longer than Python's digit limit
        raise JSONBodyError(f"the body is not valid JSON ({exc}); check its syntax") from None
    problem = json_depth_problem(value, max_depth)
    if problem:
        raise JSONBodyError(problem)
    return value


class DepthLimitedJSONParser(JSONParser):
    """DRF's JSON parser with ``loads_limited``'s limits; refusals are 400s in the API error shape."""

    def parse(self, stream: IO[Any], media_type: str | None = None, parser_context: Any = None) -> Any:
        if stream is None:
            return None
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read(limit + 1) if limit is not None else stream.read()
        if not raw:
            return None
        try:
            return loads_limited(raw)
        except JSONBodyError as exc:
            raise ParseError(f"JSON parse error: {exc}") from None
