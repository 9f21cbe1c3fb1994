from __future__ import annotations

from django.apps import AppConfig


class RebalancingConfig(AppConfig):
    name = "rebalancing"

    def ready(self) -> None:
        from rebalancing.selectors import topology_panel_context
        from topologies.panels import register_panel

        register_panel("rebalancing", "rebalancing/_topology_panel.html", topology_panel_context)
