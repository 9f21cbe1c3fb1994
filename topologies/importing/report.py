"""What an import did with each part of the input: mapped into the spec, kept verbatim, or not representable
(nothing is dropped without a note); what the render writes differently (changed); and what the operator
must answer because the YAML cannot say (questions)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["mapped", "verbatim", "unsupported", "changed", "questions"]
KINDS: tuple[Kind, ...] = ("mapped", "verbatim", "unsupported", "changed", "questions")


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

    def changed(self, source: str, message: str) -> None:
        """A field of the source that the render of the imported spec writes differently."""
        self.notes.append(Note("changed", source, message))

    def question(self, target: str, message: str) -> None:
        """A spec field the import cannot infer and leaves unset: the operator must answer it."""
        self.notes.append(Note("questions", "", message, target))

    def of(self, kind: Kind) -> list[Note]:
        return [n for n in self.notes if n.kind == kind]

    def as_dict(self) -> dict[str, Any]:
        return {kind: [n.as_dict() for n in self.of(kind)] for kind in KINDS}

    def verdict(self) -> dict[str, Any]:
        """What the preview's verdict counts: changed or dropped fields and unanswered ones."""
        changed, dropped, questions = (len(self.of(k)) for k in ("changed", "unsupported", "questions"))
        return {
            "lossless": not (changed or dropped),
            "changed": changed,
            "dropped": dropped,
            "questions": questions,
        }
