"""Role drafts (and, for Kthena, the ModelServer/ModelRoute) → one spec draft. Pure."""

from __future__ import annotations

import re
from typing import Any

from topologies.importing.pod import RoleDraft
from topologies.importing.report import Report

ROUTER_CONNECTORS = {"mooncake": "mooncake", "nixl": "nixl", "lmcache": "lmcache"}


def duration_seconds(text: Any) -> int | None:
    match = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|h)?\s*", str(text))
    if not match:
        return None
    n, unit = int(match.group(1)), match.group(2) or "s"
    return {"ms": max(1, n // 1000), "s": n, "m": n * 60, "h": n * 3600}[unit]


def duration_ms(text: Any) -> int | None:
    match = re.fullmatch(r"\s*(\d+)\s*(ms|s|m)?\s*", str(text))
    if not match:
        return None
    n, unit = int(match.group(1)), match.group(2) or "ms"
    return {"ms": n, "s": n * 1000, "m": n * 60000}[unit]


def _transfer_metrics(values: dict[str, str], conn: dict[str, Any], report: Report) -> None:
    """TENT's metrics server (TENT_METRICS_ENABLED / TENT_METRICS_HTTP_PORT) as connector.transfer_metrics."""
    if "transfer_metrics" not in values and "transfer_metrics_port" not in values:
        return
    enabled = values.get("transfer_metrics", "").strip().lower() in ("true", "1", "yes", "on")
    if enabled and conn["type"] != "mooncake":
        report.unsupported(
            "roles", "TENT_METRICS_ENABLED without Mooncake's transfer engine: no metrics server to turn on"
        )
        return
    if enabled:
        conn["transfer_metrics"] = True
        if "transfer_metrics_port" in values:
            conn["transfer_metrics_port"] = values["transfer_metrics_port"]


def spec_draft(
    *,
    name: str,
    namespace: str,
    roles: dict[str, RoleDraft],
    replicas: dict[str, int],
    backend: str,
    router_connector: str,
    report: Report,
) -> dict[str, Any]:
    main = roles.get("decode") or roles.get("prefill") or RoleDraft()
    draft: dict[str, Any] = {"name": name, "namespace": namespace, "backend": backend}
    values: dict[str, str] = {}
    for role in ("prefill", "decode"):  # decode's values win: it serves every request
        if role in roles:
            values.update(roles[role].values)
    if values.get("model_name"):
        draft["model_name"] = values["model_name"]
    if values.get("model_source"):
        draft["model_source"] = values["model_source"]
        if not values.get("model_name"):
            draft["model_name"] = values["model_source"]
            report.mapped(
                "roles", "model_name", "no --served-model-name: the engine serves the model path's name"
            )
    draft["engine"] = main.engine
    draft["image"] = main.image
    if main.port is not None:
        draft["port"] = main.port
    images = {r: d.image for r, d in roles.items() if d.image}
    if len(set(images.values())) > 1:
        report.unsupported(
            "roles.prefill.image",
            f"prefill runs {images.get('prefill')} and decode {images.get('decode')}; a topology runs one "
            f"image, {main.image}",
        )
    engines = {d.engine for d in roles.values() if d.engine}
    if len(engines) > 1:
        report.unsupported("roles", f"roles run different engines ({', '.join(sorted(engines))})")
    connector = next(
        (d.connector for d in (roles.get("prefill"), roles.get("decode")) if d and d.connector), ""
    )
    if not connector and router_connector in ROUTER_CONNECTORS and "prefill" in roles:
        connector = ROUTER_CONNECTORS[router_connector]
    if not connector and "prefill" not in roles:
        connector = "none"
    conn: dict[str, Any] = {"type": connector}
    prefill = roles.get("prefill")
    if prefill is not None and prefill.line is not None and prefill.line.kv_transfer:
        kv_port = prefill.line.kv_transfer.get("kv_port")
        if kv_port is not None:
            conn["kv_port"] = kv_port
    for key in ("side_channel_port", "bootstrap_port"):
        if key in values:
            conn[key] = values[key]
    _transfer_metrics(values, conn, report)
    draft["connector"] = conn
    report.mapped("roles", "connector.type", f"KV connector {connector or '(not found)'}")
    draft["roles"] = {}
    for role in ("prefill", "decode"):
        body = (
            dict(roles[role].role) if role in roles else {"accelerator_resource": "", "accelerator_count": 0}
        )
        body["replicas"] = replicas.get(role, 0)
        if role not in roles:
            body["accelerator_resource"] = draft["roles"].get("decode", {}).get("accelerator_resource", "")
        draft["roles"][role] = body
    if "prefill" not in roles and draft["roles"]["decode"].get("accelerator_resource"):
        draft["roles"]["prefill"]["accelerator_resource"] = draft["roles"]["decode"]["accelerator_resource"]
    return draft
