from __future__ import annotations

from typing import Any

from django.http import HttpRequest


def _viewers_issue_keys() -> bool:
    from keys.selectors import key_policy

    return bool(key_policy().viewers_issue_inference_keys)


def key_policy(request: HttpRequest) -> dict[str, Any]:
    """Whether viewers may issue their own inference keys, read only where a page asks (the viewer's
    read-only line): a callable, so other pages cost no query."""
    return {"viewers_issue_keys": _viewers_issue_keys}
