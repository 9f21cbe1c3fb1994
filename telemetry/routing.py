"""Websocket routes of the live telemetry streams (mounted under /ws/ by controlplane.routing)."""

from __future__ import annotations

from django.urls import URLPattern, path

from telemetry.consumers import OverviewConsumer, TopologyConsumer

websocket_urlpatterns: list[URLPattern] = [
    path("ws/topologies/<int:topology_id>/", TopologyConsumer.as_asgi()),
    path("ws/overview/", OverviewConsumer.as_asgi()),
]
