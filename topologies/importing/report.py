"""What an import did with each part of the input: mapped into the spec, kept verbatim, or not representable
(nothing is dropped without a note)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["mapped", "verbatim", "unsupported"]


@dataclass(frozen=True)
class Note:
    kind: Kind
    source: str  # where in the input, e.g. "ModelServing/dev/deepseek/roles[prefill].containers[vllm].args"
    message: str  # what Tandem did with it, in words
    target: str = ""  # the spec field it went to ("roles.prefill.replicas"), if any

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "source": self.source, "target": self.target, "message": self.message}


@dataclass
class Report:
    notes: list[Note] = field(default_factory=list)
    # Each role's imported --kv-transfer-config, compared with the rendered one once the spec is valid.
    kv_transfer: dict[str, dict[str, Any]] = field(default_factory=dict)

    def mapped(self, source: str, target: str, message: str) -> None:
        self.notes.append(Note("mapped", source, message, target))

    def verbatim(self, source: str, target: str, message: str) -> None:
        self.notes.append(Note("verbatim", source, message, target))

    def unsupported(self, source: str, message: str) -> None:
        self.notes.append(Note("unsupported", source, message))

    def of(self, kind: Kind) -> list[Note]:
        return [n for n in self.notes if n.kind == kind]

    def as_dict(self) -> dict[str, Any]:
        return {kind: [n.as_dict() for n in self.of(kind)] for kind in ("mapped", "verbatim", "unsupported")}
