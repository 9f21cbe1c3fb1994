"""Panels other apps add to the topology detail page (deployments timeline, live telemetry, ...).

An app calls ``register_panel(name, template, context_fn)`` from its ``AppConfig.ready()``;
``context_fn(topology)`` or ``context_fn(topology, request)`` returns the template's context. The
detail page renders the registered panels in registration order; a panel whose template or
context fails is replaced by a short notice instead of breaking the page.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.html import format_html
from django.utils.safestring import SafeString

logger = logging.getLogger(__name__)

ContextFn = Callable[..., dict[str, Any]]


@dataclass(frozen=True)
class Panel:
    name: str
    template: str
    context_fn: ContextFn


_PANELS: dict[str, Panel] = {}


def register_panel(name: str, template: str, context_fn: ContextFn) -> None:
    """Add (or replace, keeping its place) the panel called ``name``."""
    _PANELS[name] = Panel(name=name, template=template, context_fn=context_fn)


def registered_panels() -> list[Panel]:
    return list(_PANELS.values())


def _context(panel: Panel, topology: Any, request: HttpRequest | None) -> dict[str, Any]:
    try:
        wants_request = len(inspect.signature(panel.context_fn).parameters) >= 2
    except (TypeError, ValueError):
        wants_request = False
    if wants_request:
        return panel.context_fn(topology, request)
    return panel.context_fn(topology)


def render_panels(topology: Any, request: HttpRequest | None) -> list[tuple[str, SafeString]]:
    """(name, html) for every registered panel, in order."""
    out: list[tuple[str, SafeString]] = []
    for panel in registered_panels():
        try:
            context = {"topology": topology, **_context(panel, topology, request)}
            html = SafeString(render_to_string(panel.template, context, request=request))
        except Exception:
            logger.exception(
                "topology panel %s failed for topology %s", panel.name, getattr(topology, "pk", "?")
            )
            html = format_html(
                '<section class="panel"><p class="muted">The {} panel could not be shown; see the server log.'
                "</p></section>",
                panel.name,
            )
        out.append((panel.name, html))
    return out


def register_known_panels() -> None:
    """Register the panels of the apps shipped with Tandem, when they provide them."""
    known = (
        (
            "deployments",
            "deployments/_topology_panel.html",
            "deployments.selectors",
            "topology_panel_context",
        ),
        ("telemetry", "telemetry/_topology_live.html", "telemetry.selectors", "topology_live_context"),
    )
    import importlib

    from django.template import TemplateDoesNotExist
    from django.template.loader import get_template

    for name, template, module_name, function in known:
        if name in _PANELS:
            continue
        try:
            module = importlib.import_module(module_name)
            context_fn = getattr(module, function)
            get_template(template)
        except (ImportError, AttributeError, TemplateDoesNotExist):
            continue
        register_panel(name, template, context_fn)
