"""Websocket routes of every app, under /ws/."""

from __future__ import annotations

from telemetry.routing import websocket_urlpatterns as telemetry_ws
from topologies.routing import websocket_urlpatterns as topologies_ws

websocket_urlpatterns = [*telemetry_ws, *topologies_ws]
