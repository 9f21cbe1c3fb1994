"""Template filters for the deployments panel."""

from __future__ import annotations

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()
_TICKED = re.compile(r"`([^`]+)`")


@register.filter
def ticks_to_code(text: str) -> SafeString:
    """Escape the text, then show `quoted` names (images, resources, pods) as code."""
    return mark_safe(_TICKED.sub(r"<code>\1</code>", escape(str(text))))  # noqa: S308 - escaped above
