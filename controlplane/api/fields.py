"""Serializer fields whose OpenAPI description says exactly what they hold."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers


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
