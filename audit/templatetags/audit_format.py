"""Audit details as a person reads them: lists joined, changes as before → after, targets linked."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from django import template
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

register = template.Library()

# Targets that have a page of their own: target_type -> URL name taking the target's id.
TARGET_PAGES = {
    "keys.apikey": "keys:detail",
    "topologies.topology": "topologies:detail",
    "clusters.cluster": "clusters:detail",
}

ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")

ACTION_LABELS = {
    "key.create": "key created",
    "key.rotate": "secret rotated",
    "key.revoke": "key revoked",
    "key.update": "settings changed",
    "key.scopes_change": "scopes changed",
    "key.auth_failed": "request refused",
    "key.budget_alert": "budget alert",
    "keys.policy": "key policy changed",
    "cluster.register_failed": "registration refused",
    "topology.import": "imported from YAML",
    "topology.adopt": "adopted as it runs",
    "topology.release": "handed back to the cluster",
}


def _plain(value: Any) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, str) and ISO_TIME.match(value):
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            return value
        if when.tzinfo is not None:
            return f"{when.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
        return f"{when:%Y-%m-%d %H:%M:%S}"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(_plain(v) for v in value) if value else "none"
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_plain(v)}" for k, v in value.items())
    return str(value)


@register.filter
def audit_value(value: Any, key: str = "") -> str:
    """One detail value in words; a `changed` map reads `field: before → after; …`."""
    if key == "changed" and isinstance(value, dict):
        parts = []
        for field, change in value.items():
            if isinstance(change, list | tuple) and len(change) == 2:
                parts.append(f"{field.replace('_', ' ')}: {_plain(change[0])} → {_plain(change[1])}")
            else:
                parts.append(f"{field.replace('_', ' ')}: {_plain(change)}")
        return "; ".join(parts)
    return _plain(value)


@register.filter
def local_time(value: datetime | None, precision: str = "seconds") -> SafeString | str:
    """A time as every page shows one: `<time data-local>`, which static/js/local-time.js turns into
    the browser's time zone with UTC on hover; UTC, said so, without script. `precision`: seconds or
    minutes."""
    if value is None:
        return ""
    utc = value.astimezone(UTC)
    shown = utc.strftime("%Y-%m-%d %H:%M:%S" if precision == "seconds" else "%Y-%m-%d %H:%M")
    return format_html(
        '<time data-local="{}" datetime="{}" title="{} UTC">{} UTC</time>',
        precision,
        utc.isoformat(),
        utc.strftime("%Y-%m-%d %H:%M:%S"),
        shown,
    )


@register.filter
def audit_action_label(action: str) -> str:
    return ACTION_LABELS.get(action, "")


@register.simple_tag
def audit_headline(event: Any) -> str:
    """What happened in words, from the action and its details (a rollback names both revisions)."""
    detail = event.detail or {}
    if event.action == "topology.rollback" and detail.get("revision") is not None:
        source = detail.get("from_revision")
        if source is not None:
            return f"rollback from revision {source} to revision {detail['revision']}"
        return f"rollback to revision {detail['revision']} (nothing was running)"
    if event.action in ("topology.deploy", "topology.reapply") and detail.get("revision") is not None:
        return f"{event.action.split('.', 1)[1]} of revision {detail['revision']}"
    if event.action == "topology.keep_running" and detail.get("kept") is not None:
        return f"kept revision {detail['kept']} running; revision {detail.get('dropped')} no longer desired"
    if event.action == "topology.preflight_override" and detail.get("revision") is not None:
        return f"deploy of revision {detail['revision']} despite preflight: {detail.get('reason', '')}"
    return ACTION_LABELS.get(event.action, "")


def _exists(target_type: str, target_id: str) -> bool:
    from django.apps import apps

    try:
        model = apps.get_model(target_type)
    except (LookupError, ValueError):
        return False
    return bool(model._default_manager.filter(pk=target_id).exists())


@register.simple_tag
def audit_target_url(event: Any) -> str:
    name = TARGET_PAGES.get(event.target_type)
    if not name or not event.target_id or not _exists(event.target_type, event.target_id):
        return ""  # no page, or the target is gone (a deleted topology's entries stay, unlinked)
    try:
        return reverse(name, args=[event.target_id])
    except NoReverseMatch:
        return ""


@register.filter
def audit_key(name: str) -> str:
    """`previous_secret_stops_at` -> `previous secret stops at`."""
    return str(name).replace("_", " ")
