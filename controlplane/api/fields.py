"""Input fields shared by the API serializers and the page forms.

Python's ``int()`` reads any Unicode decimal digit ("١" is 1, "٣" is 3), and so do DRF's and Django's
integer fields: a request could carry a number nobody reading it would recognise. Tandem's integers
are written with the ASCII digits 0-9 only.
"""

from __future__ import annotations

import re
from typing import Any

from django import forms
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

ASCII_ONLY = "enter a whole number written with the digits 0-9"


class AsciiIntegerField(serializers.IntegerField):
    """DRF's IntegerField, refusing digits outside 0-9."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, str) and not data.isascii():
            raise serializers.ValidationError(ASCII_ONLY, code="invalid")
        return int(super().to_internal_value(data))


class AsciiIntegerFormField(forms.IntegerField):
    """Django's forms.IntegerField, refusing digits outside 0-9."""

    def to_python(self, value: Any) -> int | None:
        if isinstance(value, str) and not value.isascii():
            raise forms.ValidationError(self.error_messages.get("invalid", ASCII_ONLY), code="invalid")
        return super().to_python(value)


ASCII_INT = re.compile(r"^[+-]?[0-9]{1,18}$")


def ascii_int(value: object) -> int | None:
    """An int from an int (not a bool) or an ASCII decimal string; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and ASCII_INT.match(value.strip()):
        return int(value.strip())
    return None


@extend_schema_field(
    {
        "type": "string",
        "description": "An email address, or empty when none is set.",
        "oneOf": [{"format": "email"}, {"maxLength": 0}],
    }
)
class OptionalEmailField(serializers.EmailField):
    """An email address that may be empty (the user model's email is optional)."""

    def __init__(self, **kwargs: object) -> None:
        kwargs.setdefault("allow_blank", True)
        super().__init__(**kwargs)  # type: ignore[arg-type]


class RequiredBooleanField(serializers.BooleanField):
    """A boolean that must be given. DRF reads a form-encoded body without it as ``false`` (an unticked HTML
    checkbox is not sent); an API request that leaves it out has not said false, so it is a 400."""

    default_empty_html = serializers.empty

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", True)
        super().__init__(**kwargs)
