"""One ASGI app for HTTP and websockets (served by uvicorn)."""

from __future__ import annotations

import gc
import os
import sys
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

from controlplane.env import ConfigError

try:
    from django.core.asgi import get_asgi_application

    django_asgi_app = get_asgi_application()
except ConfigError as error:
    sys.stderr.write(f"tandem: configuration error: {error}\n")
    raise SystemExit(2) from None

from channels.auth import AuthMiddlewareStack
from channels.routing import ProtocolTypeRouter, URLRouter

from controlplane.origin import SameOriginValidator
from controlplane.routing import websocket_urlpatterns
from gateway.app import application as gateway_app
from gateway.app import lifespan, missing_v1


async def http(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The gateway's lean path for /v1/ (no Django middleware), Django for everything else."""
    path: str = scope["path"]
    if path == "/v1" or path.startswith("/v1/") or missing_v1(path):  # a base URL without /v1: JSON 404
        await gateway_app(scope, receive, send)
    else:
        await django_asgi_app(scope, receive, send)


router = ProtocolTypeRouter(
    {
        "http": http,
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http" and scope["path"].startswith("/v1/"):
        await gateway_app(scope, receive, send)  # the hot path: straight to the gateway
    elif scope["type"] == "lifespan":
        await lifespan(receive, send)
    else:
        await router(scope, receive, send)


# What is loaded by now (Django, the apps, the gateway) lives as long as the process: frozen, it is left
# out of the collector's full passes, which otherwise walk all of it (over 100 ms here) while every
# request in flight waits.
gc.collect()
gc.freeze()
