from __future__ import annotations

from django.apps import AppConfig


class TracesConfig(AppConfig):
    name = "traces"
    verbose_name = "Per-request traces"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from topologies.panels import register_panel
        from traces.views import panel_context

        register_panel("traces", "traces/_topology_panel.html", panel_context)
