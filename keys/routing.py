from __future__ import annotations

from django.urls import URLPattern, path

from keys.consumers import NotificationConsumer

websocket_urlpatterns: list[URLPattern] = [
    path("ws/notifications/", NotificationConsumer.as_asgi()),
]
