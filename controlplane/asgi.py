"""One ASGI app for HTTP and websockets (served by uvicorn)."""

from __future__ import annotations

import os
import sys

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

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
