"""Import: Kthena YAML (ModelServing, ModelServer, ModelRoute) or a plain Deployment/Service pair → a
topology spec, with a report of what was mapped, kept verbatim, or cannot be represented. Pure.

``import_manifests(text)`` never raises for bad input: YAML errors, unknown kinds and spec problems come
back in the result (``errors`` maps a field path to messages, like ``SpecError``), so the page and the
API can show everything before anything is saved.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from topologies.importing import fidelity, kthena, minimal, plain
from topologies.importing.report import Report
from topologies.spec import SpecError, TopologySpec

MAX_DOCUMENTS = 50


@dataclass
class ImportResult:
    spec: dict[str, Any]
    report: Report
    errors: dict[str, list[str]] = field(default_factory=dict)
    source: str = ""  # "kthena" | "deployments" | ""

    @property
    def ok(self) -> bool:
        return not self.errors

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "source": self.source,
            "spec": self.spec,
            "report": self.report.as_dict(),
            "verdict": self.report.verdict(),
            "errors": self.errors,
        }


def documents(text: str) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        return [], {"yaml": [f"is not valid YAML{where}: {problem}; fix the document and import again"]}
    if len(docs) > MAX_DOCUMENTS:
        return [], {"yaml": [f"holds {len(docs)} documents; import at most {MAX_DOCUMENTS} at a time"]}
    bad = [i + 1 for i, d in enumerate(docs) if not isinstance(d, dict) or "kind" not in d]
    if bad:
        return [], {"yaml": [f"document(s) {bad} are not Kubernetes objects (no kind); remove them"]}
    return docs, {}


def validate(draft: dict[str, Any]) -> tuple[dict[str, Any], dict[str, list[str]]]:
    try:
        return TopologySpec.from_dict(draft).to_dict(), {}
    except SpecError as error:
        return draft, {f"spec.{path}": messages for path, messages in error.errors.items()}


def import_manifests(text: str, *, overrides: dict[str, Any] | None = None) -> ImportResult:
    """The spec ``text`` describes; ``overrides`` (top-level spec keys) fill in what the YAML lacks."""
    report = Report()
    docs, errors = documents(text)
    if errors:
        return ImportResult(spec={}, report=report, errors=errors)
    kinds = {d.get("kind") for d in docs}
    try:
        if "ModelServing" in kinds:
            source, draft, errors = "kthena", *kthena.draft(docs, report)
        elif "Deployment" in kinds:
            source, draft, errors = "deployments", *plain.draft(docs, report)
        else:
            source = ""
    except (AttributeError, TypeError, ValueError, KeyError, IndexError) as error:
        # A document whose fields have the wrong types (a list where an object belongs, ...): the
        # API server would refuse it too. Say so instead of guessing.
        return ImportResult(
            spec={},
            report=Report(),
            errors={
                "yaml": [
                    f"a {'/'.join(sorted(str(k) for k in kinds))} document has a field of the wrong type "
                    f"({type(error).__name__}: {str(error)[:120]}); "
                    "check it with kubectl apply --dry-run=server"
                ]
            },
        )
    if not source:
        return ImportResult(
            spec={},
            report=report,
            errors={
                "yaml": [
                    "holds no ModelServing and no Deployment; import a Kthena ModelServing "
                    "(with its ModelServer/ModelRoute) or the prefill and decode Deployments"
                ]
            },
        )
    if errors:
        return ImportResult(spec=draft, report=report, errors=errors, source=source)
    # What the YAML cannot say is left unset and asked for (questions), never invented.
    draft.setdefault("slo", {"ttft_ms": None, "tbt_ms": None})
    draft.setdefault("rebalancing", {"prefill": None, "decode": None})
    for key, value in (overrides or {}).items():
        if isinstance(value, dict) and isinstance(draft.get(key), dict):
            draft[key] = {**draft[key], **value}
        else:
            draft[key] = value
    spec, errors = validate(draft)
    if not (draft.get("connector") or {}).get("type"):
        errors["spec.connector.type"] = [
            "is not in the YAML (no --kv-transfer-config, --disaggregation-transfer-backend or ModelServer "
            "kvConnector); choose the KV connector the engines use, or import the ModelServer too"
        ]
    if not errors:
        spec = minimal.prune(spec)  # the overlay says only what Tandem would not render anyway
        kthena.compare_kv_transfer(spec, report)
        account(docs, TopologySpec.from_dict(spec), report)
    return ImportResult(spec=spec, report=report, errors=errors, source=source)


QUESTIONS = {
    "slo.ttft_ms": "the YAML holds no time-to-first-token target; set the p95 TTFT target in ms "
    "(the planner and SLO alerts wait for it)",
    "slo.tbt_ms": "the YAML holds no time-between-tokens target; set the p95 TBT target in ms "
    "(the planner and SLO alerts wait for it)",
    "rebalancing.prefill": "the YAML holds no bounds for prefill replicas; set rebalancing.prefill min and "
    "max (the planner moves nothing until both roles have them)",
    "rebalancing.decode": "the YAML holds no bounds for decode replicas; set rebalancing.decode min and "
    "max (the planner moves nothing until both roles have them)",
}


def account(docs: list[dict[str, Any]], spec: TopologySpec, report: Report) -> None:
    """Render the imported spec and note every source field it writes differently, and each question."""
    from topologies.render import render

    topology_id, revision = fidelity.identity(docs)
    for diff in fidelity.differences(docs, render(spec, topology_id=topology_id, revision=revision)):
        if not diff.added:
            report.changed(diff.path, diff.describe())
    for path in spec.unanswered():
        report.question(path, QUESTIONS[path])
