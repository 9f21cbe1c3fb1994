"""Print the endpoint → scope table (docs/api-keys.md carries it; a test keeps them equal)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from keys.endpoint_scopes import markdown_table


class Command(BaseCommand):
    help = "Print the REST API's endpoint -> scope table in Markdown."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(markdown_table())
