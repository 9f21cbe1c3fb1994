from __future__ import annotations

from django.apps import AppConfig


class RebalancingConfig(AppConfig):
    name = "rebalancing"

    def ready(self) -> None:
        from rebalancing.views import panel_context
        from topologies.panels import register_panel

        register_panel("rebalancing", "rebalancing/_topology_panel.html", panel_context)
