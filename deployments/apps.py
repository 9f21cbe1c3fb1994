from __future__ import annotations

from django.apps import AppConfig


class DeploymentsConfig(AppConfig):
    name = "deployments"

    def ready(self) -> None:
        from deployments.selectors import topology_panel_context
        from topologies.panels import register_panel

        register_panel("deployments", "deployments/_topology_panel.html", topology_panel_context)
