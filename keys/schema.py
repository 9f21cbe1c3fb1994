"""The Bearer scheme in the OpenAPI schema, so generated clients and the interactive docs take a key."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "keys.authentication.ApiKeyAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "tdm_m_<30 base62><6 checksum>",
            "description": "A management API key (Keys page, or `manage.py create_api_key`). "
            "Each endpoint names the scope it needs.",
        }
