from __future__ import annotations

from django.apps import AppConfig


class KeysConfig(AppConfig):
    name = "keys"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from keys import schema, signals  # noqa: F401 - registers the owner hooks and the schema's Bearer scheme
