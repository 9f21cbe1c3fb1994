"""Filters whose validation errors name the values they accept (shared by every app's FilterSet)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import django_filters


def _accepted(choices: Iterable[tuple[Any, Any]]) -> str:
    return ", ".join(str(value) for value, _ in choices).replace("%", "%%")


class ChoiceFilter(django_filters.ChoiceFilter):
    """``django_filters.ChoiceFilter`` whose error lists the accepted values: "bogus is not one of the
    choices; use one of: healthy, degraded, ...". Choices given as a callable keep the stock message."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        choices = kwargs.get("choices")
        if choices is not None and not callable(choices) and "error_messages" not in kwargs:
            kwargs["error_messages"] = {
                "invalid_choice": f"%(value)s is not one of the choices; use one of: {_accepted(choices)}"
            }
        super().__init__(*args, **kwargs)


class IdFilter(django_filters.NumberFilter):
    """An object id: a whole number ≥ 1. ``1.5`` or ``-1`` is a 400 naming the filter, not a silently
    truncated match (``NumberFilter`` reads decimals)."""

    field_class = django_filters.fields.forms.IntegerField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault(
            "error_messages",
            {
                "invalid": "must be an id: a whole number such as 12",
                "min_value": "must be an id: a whole number ≥ 1",
            },
        )
        super().__init__(*args, **kwargs)


class BooleanFilter(django_filters.TypedChoiceFilter):
    """``true`` or ``false`` (empty: no filter, as the pages' "any" sends). ``null`` or ``yes`` is a 400
    naming the filter and the two values, not silently no filter (``django_filters.BooleanFilter`` reads
    anything it does not know as unset)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("choices", (("true", "true"), ("false", "false")))
        kwargs.setdefault("coerce", lambda value: value == "true")
        kwargs.setdefault("empty_value", None)
        kwargs.setdefault(
            "error_messages", {"invalid_choice": "%(value)s is neither true nor false; use true or false"}
        )
        super().__init__(*args, **kwargs)
