from __future__ import annotations

from django.apps import AppConfig


class WorkloadConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "workload"
    verbose_name = "Workload: prefix reuse and request traces"

    def ready(self) -> None:
        from topologies.panels import register_panel
        from workload.views import panel_context

        register_panel("hit-rate", "workload/_hit_rate_panel.html", panel_context)
