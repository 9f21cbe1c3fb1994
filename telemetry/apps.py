from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "telemetry"

    def ready(self) -> None:
        from telemetry.views import topology_live_panel_context
        from topologies.panels import register_panel

        register_panel("telemetry", "telemetry/_topology_live.html", topology_live_panel_context)
