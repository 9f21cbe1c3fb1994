"""Template helpers for pages a person reads: answers inside panels, kept form input, plain messages."""

from __future__ import annotations

import ast
import re
from typing import Any

from django import template
from django.conf import settings
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from topologies.answers import kept_input as _kept_input
from topologies.answers import panel_tag

register = template.Library()
_TICKED = re.compile(r"`([^`\n]+)`")
_REPR = re.compile(r"\{[^{}\n]*\}|\[[^\[\]\n]*\]")


def _words(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_words(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_words(v) for v in value)
    return str(value)


def _unrepr(match: re.Match[str]) -> str:
    try:
        value = ast.literal_eval(match.group(0))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return match.group(0)
    if isinstance(value, (dict, list)) and value:
        return _words(value)
    return match.group(0)


@register.filter
def plain_words(text: Any) -> SafeString:
    """A message as a person reads it: a Python list or dict written out in words (``['a', 'b']`` →
    ``a, b``; ``{'field': ['fix']}`` → ``field: fix``) and `quoted` names shown as code, never backticks."""
    words = _REPR.sub(_unrepr, str(text))
    return mark_safe(_TICKED.sub(r"<code>\1</code>", escape(words)))  # noqa: S308 - escaped above


@register.simple_tag(takes_context=True)
def panel_answers(context: template.Context, panel: str) -> list[Any]:
    """The messages answering ``panel``'s forms (tagged ``panel-<panel>``)."""
    tag = panel_tag(panel)
    return [m for m in context.get("messages") or () if tag in (m.extra_tags or "").split()]


@register.inclusion_tag("_panel_answer.html", takes_context=True)
def panel_answer(context: template.Context, panel: str) -> dict[str, Any]:
    """The answers of ``panel``'s forms, in a slot that is always there (id ``answer-<panel>``)."""
    return {"panel": panel, "answers": panel_answers(context, panel)}


@register.simple_tag(takes_context=True)
def kept_input(context: template.Context, key: str, pk: Any = None) -> dict[str, Any]:
    """What a refused form posted and its errors per field (``{"values": ..., "errors": ...}``), once;
    ``pk``: the topology the form belongs to (the stash key is ``<key>-<pk>``)."""
    return _kept_input(context.get("request"), key if pk is None else f"{key}-{pk}")


@register.filter
def kept(kept_input: dict[str, Any] | None, name: str) -> Any:
    """The kept value of field ``name``, or None when nothing was kept."""
    return ((kept_input or {}).get("values") or {}).get(name)


@register.filter
def kept_errors(kept_input: dict[str, Any] | None, name: str) -> list[str]:
    return list(((kept_input or {}).get("errors") or {}).get(name) or ())


@register.simple_tag
def upload_limit() -> int:
    """The largest form body the server reads (DATA_UPLOAD_MAX_MEMORY_SIZE), for the page's own check."""
    return int(getattr(settings, "DATA_UPLOAD_MAX_MEMORY_SIZE", None) or 2_621_440)
