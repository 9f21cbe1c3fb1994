"""Kthena documents (ModelServing, ModelServer, ModelRoute) → a spec draft. Pure."""

from __future__ import annotations

from typing import Any

from kube import labels
from topologies.importing import assemble
from topologies.importing.pod import RoleDraft, read_role
from topologies.importing.report import Report
from topologies.render import engine as render_engine
from topologies.render import kthena as render_kthena
from topologies.spec import TopologySpec

KTHENA_KINDS = ("ModelServing", "ModelServer", "ModelRoute")
# kv-transfer-config keys Tandem sets per pod (engine_id) or that say nothing about behaviour.
KV_PER_POD = ("engine_id",)


def _where(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    return f"{doc.get('kind')}/{meta.get('namespace', 'default')}/{meta.get('name')}"


def _pick(docs: list[dict[str, Any]], kind: str, report: Report, match: Any = None) -> dict[str, Any] | None:
    found = [d for d in docs if d.get("kind") == kind]
    chosen = next((d for d in found if match is not None and match(d)), found[0] if found else None)
    for other in found:
        if other is not chosen:
            report.unsupported(_where(other), f"a second {kind}; a topology has one, {_where(chosen or {})}")
    return chosen


def draft(docs: list[dict[str, Any]], report: Report) -> tuple[dict[str, Any], dict[str, list[str]]]:
    serving = _pick(docs, "ModelServing", report)
    assert serving is not None
    meta = serving.get("metadata") or {}
    name = str(meta.get("name", ""))
    namespace = str(meta.get("namespace") or "default")
    where = _where(serving)
    server = _pick(
        docs,
        "ModelServer",
        report,
        lambda d: (
            ((d.get("spec") or {}).get("workloadSelector") or {})
            .get("matchLabels", {})
            .get(labels.KTHENA_NAME)
            == name
        ),
    )
    route = _pick(
        docs,
        "ModelRoute",
        report,
        lambda d: (
            server is not None
            and any(
                t.get("modelServerName") == (server.get("metadata") or {}).get("name")
                for rule in (d.get("spec") or {}).get("rules") or []
                for t in rule.get("targetModels") or []
            )
        ),
    )
    for doc in docs:
        if doc.get("kind") not in KTHENA_KINDS:
            report.unsupported(
                _where(doc), f"{doc.get('kind')} is not part of a topology; keep applying it yourself"
            )
    report.mapped(where, "name", f"topology {name} in namespace {namespace}")
    spec = serving.get("spec") or {}
    if int(spec.get("replicas", 1) or 1) != 1:
        report.unsupported(
            f"{where}.spec.replicas",
            f"{spec.get('replicas')} serving groups; Tandem runs one and scales roles",
        )
    for key in sorted(
        set(spec) - {"replicas", "template", "schedulerName", "recoveryPolicy", "rolloutStrategy"}
    ):
        report.unsupported(f"{where}.spec.{key}", f"{key} is not part of a topology spec")
    roles: dict[str, RoleDraft] = {}
    replicas: dict[str, int] = {}
    for role in (spec.get("template") or {}).get("roles") or []:
        if not isinstance(role, dict):
            continue
        role_name = str(role.get("name", ""))
        src = f"{where}.roles[{role_name}]"
        if role_name not in ("prefill", "decode"):
            report.unsupported(src, f"role {role_name}; a topology has the roles prefill and decode")
            continue
        if int(role.get("workerReplicas", 0) or 0) > 0 or (
            (role.get("workerTemplate") or {}).get("spec") or {}
        ).get("containers"):
            report.unsupported(
                f"{src}.workerTemplate", "multi-node workers; Tandem runs one pod per instance"
            )
        template = role.get("entryTemplate") or {}
        roles[role_name] = read_role(
            template.get("spec") or {}, role_name, src, report, template.get("metadata")
        )
        line = roles[role_name].line
        if line is not None and line.kv_transfer:
            report.kv_transfer[role_name] = line.kv_transfer
        replicas[role_name] = int(role.get("replicas", 1) or 0)
        report.mapped(f"{src}.replicas", f"roles.{role_name}.replicas", str(replicas[role_name]))
    if not roles:
        return {}, {"yaml": [f"{where} has no prefill or decode role; name its roles prefill and decode"]}
    router_connector = ""
    if server is not None:
        router_connector = str(((server.get("spec") or {}).get("kvConnector") or {}).get("type", ""))
    result = assemble.spec_draft(
        name=name,
        namespace=namespace,
        roles=roles,
        replicas=replicas,
        backend="kthena",
        router_connector=router_connector,
        report=report,
    )
    if server is not None:
        _server(server, result, report)
    if route is not None:
        _route(route, result, report)
    return result, {}


def _server(server: dict[str, Any], result: dict[str, Any], report: Report) -> None:
    where = _where(server)
    body = server.get("spec") or {}
    if body.get("model"):
        result.setdefault("model_name", str(body["model"]))
        report.mapped(f"{where}.spec.model", "model_name", str(body["model"]))
    port = (body.get("workloadPort") or {}).get("port")
    if port is not None:
        result.setdefault("port", port)
        report.mapped(f"{where}.spec.workloadPort", "port", str(port))
    routing = result.setdefault("routing", {})
    policy = body.get("trafficPolicy") or {}
    if "timeout" in policy:
        routing["timeout_seconds"] = assemble.duration_seconds(policy["timeout"])
        report.mapped(
            f"{where}.spec.trafficPolicy.timeout", "routing.timeout_seconds", str(policy["timeout"])
        )
    retry = policy.get("retry") or {}
    if "attempts" in retry:
        routing["retry_attempts"] = retry["attempts"]
        report.mapped(f"{where}.spec.trafficPolicy.retry", "routing.retry_attempts", str(retry["attempts"]))
    if "retryInterval" in retry:
        routing["retry_interval_ms"] = assemble.duration_ms(retry["retryInterval"])
        report.mapped(
            f"{where}.spec.trafficPolicy.retry", "routing.retry_interval_ms", str(retry["retryInterval"])
        )
    given = str((body.get("kvConnector") or {}).get("type", ""))
    connector = str((result.get("connector") or {}).get("type", ""))
    rendered = render_kthena.ROUTER_CONNECTOR.get(connector, "")
    if given and rendered and given != rendered:
        report.unsupported(
            f"{where}.spec.kvConnector",
            f"kvConnector {given} disagrees with the engines' KV connector {connector}; "
            f"Tandem renders {rendered} from the spec's connector",
        )
    if body.get("inferenceEngine"):
        report.mapped(
            f"{where}.spec.inferenceEngine", "engine", f"{body['inferenceEngine']} (rendered from engine)"
        )
    name = (server.get("metadata") or {}).get("name")
    if name != result["name"]:
        report.mapped(
            where, "name", f"ModelServer {name} is rendered as {result['name']}, the topology's name"
        )
    for key in sorted(
        set(body)
        - {"model", "workloadPort", "trafficPolicy", "inferenceEngine", "kvConnector", "workloadSelector"}
    ):
        report.unsupported(f"{where}.spec.{key}", f"{key} is not part of a topology spec")


def _route(route: dict[str, Any], result: dict[str, Any], report: Report) -> None:
    where = _where(route)
    body = route.get("spec") or {}
    if body.get("modelName"):
        result.setdefault("routing", {})["model_name"] = str(body["modelName"])
        result.setdefault("model_name", str(body["modelName"]))
        report.mapped(f"{where}.spec.modelName", "routing.model_name", str(body["modelName"]))
    rules = body.get("rules") or []
    targets = [t for rule in rules for t in rule.get("targetModels") or []]
    if len(rules) > 1 or len(targets) > 1:
        report.unsupported(
            f"{where}.spec.rules", "several rules or targets; Tandem routes to its one ModelServer"
        )
    for key in sorted(set(body) - {"modelName", "rules"}):
        report.unsupported(f"{where}.spec.{key}", f"{key} is not part of a topology spec")


def compare_kv_transfer(spec: dict[str, Any], report: Report) -> None:
    """Name every imported --kv-transfer-config value Tandem renders differently (nothing silently)."""
    imported = report.kv_transfer
    parsed = TopologySpec.from_dict(spec)
    for role, given in imported.items():
        rendered = render_engine.kv_transfer_config(parsed, role) or {}
        for key, value in sorted(given.items()):
            if key in KV_PER_POD:
                continue
            if str(rendered.get(key)) != str(value) and rendered.get(key) != value:
                report.unsupported(
                    f"roles.{role}.kv_transfer_config.{key}",
                    f"{key}={value!r} is rendered as {rendered.get(key)!r} from the spec's connector",
                )
