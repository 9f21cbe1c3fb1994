"""The spec's field readers: text, numbers, booleans, choices, quantities, maps, sizes and arguments
read out of a raw dict, each problem collected under its field path instead of stopping at the
first. `SpecParser` reads the spec's sections with them; `spec_schema` records them instead."""

from __future__ import annotations

import re
from typing import Any

from topologies.spec import (
    CREDENTIAL_ENV,
    ENV_NAME,
    LABEL_KEY,
    LABEL_VALUE,
    MANAGED_FLAGS,
    SECRET_REF,
)
from topologies.spec_overlay import check as overlay_check
from topologies.spec_values import TEXT_MAX, ascii_int, quantity_problem, text_problem


class FieldReader:
    """Reads a raw dict field by field, collecting every problem instead of stopping at the first."""

    def __init__(self, data: Any) -> None:
        self.data = data if isinstance(data, dict) else {}
        self.errors: dict[str, list[str]] = {}
        if not isinstance(data, dict):
            self.err("spec", "must be an object with name, namespace, engine, connector, roles, ...")

    def err(self, path: str, message: str) -> None:
        self.errors.setdefault(path, []).append(message)

    def section(self, parent: dict[str, Any], key: str, path: str) -> dict[str, Any]:
        value = parent.get(key, {})
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.err(path, "must be an object")
            return {}
        return value

    def text(
        self,
        src: dict[str, Any],
        key: str,
        path: str,
        default: str | None = None,
        *,
        limit: int | None = TEXT_MAX,
    ) -> str:
        """A trimmed string without control or invisible characters, at most ``limit`` characters
        (None: the caller checks the length with a message of its own)."""
        value = src.get(key, default)
        if value is None or (isinstance(value, str) and not value.strip()):
            if default is not None:
                return default
            self.err(path, "is required")
            return ""
        if not isinstance(value, str):
            self.err(path, "must be a string")
            return ""
        value = value.strip()
        problem = text_problem(value, limit=limit or len(value), example="a shorter value")
        if problem:
            self.err(path, problem)
            return ""
        return value

    def integer(
        self, src: dict[str, Any], key: str, path: str, default: int | None = None, *, lo: int, hi: int
    ) -> int:
        value = src.get(key, default)
        if value is None or value == "":
            if default is not None:
                return default
            self.err(path, "is required")
            return lo
        number = ascii_int(value)
        if number is None:
            self.err(path, f"must be a whole number between {lo} and {hi}, written with the digits 0-9")
            return lo
        value = number
        if not lo <= value <= hi:
            self.err(path, f"must be between {lo} and {hi} (got {value})")
            return max(lo, min(hi, value))
        return value

    def boolean(self, src: dict[str, Any], key: str, path: str, default: bool) -> bool:
        value = src.get(key, default)
        if value is None or value == "":
            return default
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"  # the editor's text
        if not isinstance(value, bool):
            self.err(path, "must be true or false")
            return default
        return value

    def check(self, path: str, problem: str | None) -> None:
        if problem:
            self.err(path, problem)

    def quantity(self, src: dict[str, Any], key: str, path: str, *, what: str, example: str) -> str:
        """A Kubernetes quantity; numbers are taken as written (8 → "8")."""
        raw = src.get(key)
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            raw = str(raw)
            src = {key: raw}
        value = self.text(src, key, path, "")
        if value:
            problem = quantity_problem(value, what=what, example=example)
            if problem:
                self.err(path, problem)
                return ""
        return value

    def choice(
        self, src: dict[str, Any], key: str, path: str, options: tuple[str, ...], default: str = ""
    ) -> str:
        value = self.text(src, key, path, default or None)
        if value and value not in options:
            self.err(path, f"unknown value {value!r}; choose one of: {', '.join(options)}")
        return value

    def str_map(self, src: dict[str, Any], key: str, path: str, *, env: bool) -> dict[str, str]:
        value = src.get(key) or {}
        if not isinstance(value, dict):
            self.err(path, "must be an object of name → value strings")
            return {}
        out: dict[str, str] = {}
        for k, v in value.items():
            k = str(k).strip()
            if env and not ENV_NAME.match(k):
                self.err(f"{path}.{k}", "is not a valid environment variable name; use letters, digits, _")
                continue
            if not env and not LABEL_KEY.match(k):
                self.err(
                    f"{path}.{k}", "is not a valid node label key (e.g. node.kubernetes.io/instance-type)"
                )
                continue
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                self.err(f"{path}.{k}", "must be a string")
                continue
            # Env values may span lines (\n, \t); nothing else hidden, and nothing huge.
            problem = text_problem(
                str(v).replace("\n", " ").replace("\t", " "), limit=TEXT_MAX, example="a shorter value"
            )
            if problem:
                self.err(f"{path}.{k}", problem)
                continue
            if env and str(v).startswith("secret:") and not SECRET_REF.match(str(v)):
                self.err(
                    f"{path}.{k}", "a secret reference reads secret:<secret-name>/<key>, e.g. secret:hf/token"
                )
                continue
            if env and CREDENTIAL_ENV.search(k) and not SECRET_REF.match(str(v)):
                self.err(
                    f"{path}.{k}",
                    "looks like a credential, and the spec is shown to every viewer and kept in every "
                    "revision; put it in a Kubernetes Secret in the topology's namespace and write "
                    "secret:<secret-name>/<key>",
                )
                continue
            if not env and not LABEL_VALUE.match(str(v)):
                self.err(f"{path}.{k}", "is not a valid label value (≤63 of letters, digits, -_.)")
                continue
            out[k] = str(v)
        return dict(sorted(out.items()))

    def sizes(self, src: dict[str, Any], key: str, path: str) -> list[int]:
        """A non-empty list of positive whole numbers (a string "2048, 128" is split)."""
        raw = src.get(key)
        if isinstance(raw, str):
            raw = [s for s in re.split(r"[,\s×x]+", raw.strip("[]() ")) if s]
        shape: list[int] = []
        if not isinstance(raw, list) or not raw:
            self.err(path, "is required: a list of positive sizes, e.g. [2048, 128, 1, 576]")
            return shape
        for item in raw:
            size = ascii_int(item) or 0
            if size <= 0:
                self.err(
                    path, f"{item!r} is not a positive size; use whole numbers, e.g. [2048, 128, 1, 576]"
                )
                break
            shape.append(size)
        return shape

    def arguments(self, src: dict[str, Any], key: str, path: str) -> tuple[str, ...]:
        """Extra command-line arguments (a string is split on spaces); flags Tandem sets are refused."""
        raw = src.get(key) or []
        if isinstance(raw, str):
            raw = raw.split()
        args: list[str] = []
        if not isinstance(raw, list):
            self.err(path, "must be a list of command-line arguments")
            return ()
        for arg in raw:
            if isinstance(arg, bool) or not isinstance(arg, (str, int, float)):
                self.err(path, f"{arg!r:.40} is not a command-line argument; use strings")
                continue
            arg = str(arg)
            problem = text_problem(arg, limit=TEXT_MAX, example="--max-model-len=8192")
            if problem:
                self.err(path, f"{arg[:40]!r}: {problem}")
                continue
            flag = arg.split("=", 1)[0]
            if flag in MANAGED_FLAGS:
                self.err(
                    path,
                    f"{flag} is set by Tandem from the spec; remove it and set "
                    "the matching field (port, tensor_parallel_size, connector, ...) instead",
                )
            args.append(arg)
        return tuple(args)

    def unset_or_integer(
        self, src: dict[str, Any], key: str, path: str, default: int, *, lo: int, hi: int
    ) -> int | None:
        """An integer, or None when the key is given as null: not set yet (an import never invents it)."""
        if key in src and src[key] is None:
            return None
        return self.integer(src, key, path, default, lo=lo, hi=hi)

    def overlay(self, src: dict[str, Any], key: str, path: str) -> dict[str, Any]:
        """The role's pod-template overlay (spec_overlay), normalised to plain JSON."""
        value, errors = overlay_check(src.get(key), path)
        for where, messages in errors.items():
            for message in messages:
                self.err(where, message)
        return value
