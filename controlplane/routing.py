"""Websocket routes of every app, under /ws/."""

from __future__ import annotations

from django.urls import path

from controlplane.consumers import SystemConsumer
from keys.routing import websocket_urlpatterns as keys_ws
from telemetry.routing import websocket_urlpatterns as telemetry_ws
from topologies.routing import websocket_urlpatterns as topologies_ws

websocket_urlpatterns = [
    path("ws/system/", SystemConsumer.as_asgi()),
    *telemetry_ws,
    *topologies_ws,
    *keys_ws,
]
