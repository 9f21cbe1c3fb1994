"""Answers of the topology page's panel forms, shown inside the panel where the form was sent.

A panel action (deploy, rollback, scale, set the ratio, save the planner or the gateway settings) answers
with a message tagged ``panel-<name>``: the topology page renders it inside that panel (``{% panel_answer
"<name>" %}``) and leaves it out of the page-top list, and the action redirects to the panel's anchor, so
the answer is in the viewport where the person clicked. A form refused for its input keeps what was typed:
the view stashes the posted values and the errors per field in the session for the next page view
(``{% kept_input "<key>" as kept %}`` reads them once). Secrets (a fallback API key) are never stashed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import reverse

PANELS = ("deployments", "rebalancing", "gateway")
_KEPT = "kept-input:"


def panel_tag(panel: str) -> str:
    return f"panel-{panel}"


def answer(request: HttpRequest, panel: str, level: int, text: str) -> None:
    """Queue ``text`` as the answer shown inside ``panel`` on the next topology page view (one full stop
    at the end, not two: "… did you mean …/v1?" stays as it is)."""
    text = text.rstrip()
    while text.endswith("..") or text.endswith("?.") or text.endswith("!."):
        text = text[:-1]
    messages.add_message(request, level, text, extra_tags=panel_tag(panel))


def back_to(pk: int, anchor: str) -> HttpResponseRedirect:
    """Back to the topology page, scrolled to ``anchor`` (the part of the panel holding the answer)."""
    return HttpResponseRedirect(reverse("topologies:detail", args=[pk]) + f"#{anchor}")


def keep_input(
    request: HttpRequest,
    key: str,
    values: Mapping[str, Any],
    errors: Mapping[str, Iterable[Any]] | None = None,
    *,
    secret: Iterable[str] = (),
) -> None:
    """Stash what was posted (minus the ``secret`` fields) and the errors per field for the next view."""
    hidden = set(secret) | {"csrfmiddlewaretoken"}
    kept: dict[str, Any] = {}
    for name in values:
        if name in hidden:
            continue
        many = values.getlist(name) if hasattr(values, "getlist") else [values[name]]
        kept[name] = many[0] if len(many) == 1 else many
    request.session[_KEPT + key] = {
        "values": kept,
        "errors": {name: [str(m) for m in msgs] for name, msgs in (errors or {}).items()},
    }


def kept_input(request: HttpRequest | None, key: str) -> dict[str, Any]:
    """What ``keep_input`` stashed under ``key`` (once), or an empty answer."""
    session = getattr(request, "session", None)
    if session is None:
        return {}
    kept = session.pop(_KEPT + key, None)
    return kept if isinstance(kept, dict) else {}
