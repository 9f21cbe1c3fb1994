"""Notification bodies for each target format (PURE): generic JSON, Slack, Alertmanager (webhook v4)."""

from __future__ import annotations

import hashlib
from typing import Any, Literal, TypedDict

Status = Literal["firing", "resolved"]
ZERO_TIME = "0001-01-01T00:00:00Z"  # Alertmanager's endsAt of an alert still firing


class AlertInfo(TypedDict):
    alert_id: int
    topology_id: int
    topology: str
    slo_id: int
    sli: str
    slo: str  # the objective in words
    severity: str
    status: Status
    rule: str
    burn_threshold: float
    long_burn: float
    short_burn: float
    budget_remaining: float | None
    started: str  # RFC 3339, UTC
    ended: str | None
    url: str  # the topology page's SLO section


def summary(info: AlertInfo) -> str:
    where = f"{info['topology']}: {info['sli'].upper()} SLO"
    if info["status"] == "resolved":
        return f"Resolved: {where} no longer burning its error budget fast ({info['slo']})"
    return (
        f"{info['severity'].capitalize()}: {where} burning its error budget at {info['long_burn']:.1f}× "
        f"(rule {info['rule']}, threshold {info['burn_threshold']:.2f}×; {info['slo']})"
    )


def _budget(info: AlertInfo) -> str:
    left = info["budget_remaining"]
    return "no data" if left is None else f"{left * 100:.1f} %"


def generic(info: AlertInfo) -> dict[str, Any]:
    return {"kind": "tandem.slo_alert", "summary": summary(info), "alert": dict(info)}


def slack(info: AlertInfo) -> dict[str, Any]:
    text = summary(info)
    icon = ":white_check_mark:" if info["status"] == "resolved" else ":rotating_light:"
    fields = [
        {"type": "mrkdwn", "text": f"*Topology*\n{info['topology']}"},
        {"type": "mrkdwn", "text": f"*Severity*\n{info['severity']}"},
        {
            "type": "mrkdwn",
            "text": f"*Burn rate*\n{info['long_burn']:.2f}× long, {info['short_burn']:.2f}× short",
        },
        {"type": "mrkdwn", "text": f"*Budget left*\n{_budget(info)}"},
    ]
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"{icon} *{text}*"}},
            {"type": "section", "fields": fields},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": f"<{info['url']}|Open in Tandem>"}]},
        ],
    }


def _labels(info: AlertInfo) -> dict[str, str]:
    return {
        "alertname": "SLOErrorBudgetBurn",
        "topology": info["topology"],
        "sli": info["sli"],
        "severity": info["severity"],
        "slo_id": str(info["slo_id"]),
    }


def alertmanager(info: AlertInfo, *, receiver: str) -> dict[str, Any]:
    """The body Alertmanager sends to a webhook receiver (version 4): one group of one alert."""
    labels = _labels(info)
    group_labels = {"alertname": labels["alertname"], "topology": labels["topology"]}
    annotations = {
        "summary": summary(info),
        "description": info["slo"],
        "burn_rate_long": f"{info['long_burn']:.3f}",
        "burn_rate_short": f"{info['short_burn']:.3f}",
        "burn_threshold": f"{info['burn_threshold']:.3f}",
        "rule": info["rule"],
        "budget_remaining": _budget(info),
    }
    fingerprint = hashlib.sha256(
        "".join(f"{k}={v};" for k, v in sorted(labels.items())).encode()
    ).hexdigest()[:16]
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted(group_labels.items()))
    base = info["url"].split("/topologies/")[0]
    return {
        "version": "4",
        "groupKey": f"{{}}:{{{inner}}}",
        "truncatedAlerts": 0,
        "status": info["status"],
        "receiver": receiver,
        "groupLabels": group_labels,
        "commonLabels": labels,
        "commonAnnotations": annotations,
        "externalURL": base,
        "alerts": [
            {
                "status": info["status"],
                "labels": labels,
                "annotations": annotations,
                "startsAt": info["started"],
                "endsAt": info["ended"] or ZERO_TIME,
                "generatorURL": info["url"],
                "fingerprint": fingerprint,
            }
        ],
    }


def render(fmt: str, info: AlertInfo, *, receiver: str) -> dict[str, Any]:
    if fmt == "slack":
        return slack(info)
    if fmt == "alertmanager":
        return alertmanager(info, receiver=receiver)
    return generic(info)


def mask_url(url: str) -> str:
    """A URL as shown back: scheme and host, then only the last 4 characters (``https://hooks.example/…abcd``)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "…" + url[-4:] if len(url) > 8 else "…"
    host = rest.split("/", 1)[0].rsplit("@", 1)[-1]
    tail = rest[len(rest.split("/", 1)[0]) :]
    return f"{scheme}://{host}/…{tail[-4:]}" if len(tail) > 4 else f"{scheme}://{host}{'/…' if tail else ''}"
