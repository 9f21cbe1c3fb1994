from __future__ import annotations

from django.apps import AppConfig


class SloConfig(AppConfig):
    name = "slo"
    verbose_name = "SLOs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from slo import receivers  # noqa: F401 - each telemetry interval is counted against the SLOs
        from slo.selectors import topology_panel_context
        from topologies.panels import register_panel

        register_panel("slo", "slo/_topology_panel.html", topology_panel_context)
