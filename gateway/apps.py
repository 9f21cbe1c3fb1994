from __future__ import annotations

from django.apps import AppConfig


class GatewayConfig(AppConfig):
    name = "gateway"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from gateway import signals  # noqa: F401 - route changes reach every gateway process
        from gateway.selectors import topology_gateway_context
        from topologies.panels import register_panel

        register_panel("gateway", "gateway/_topology_panel.html", topology_gateway_context)
