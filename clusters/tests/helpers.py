"""Test helpers: kubeconfig text and a loopback address nothing listens on."""

from __future__ import annotations

import base64
import socket

import yaml


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def kubeconfig_text(
    *,
    server: str,
    user: dict | None = None,
    ca: str | None = None,
    contexts: tuple[str, ...] = ("lab",),
    current: str = "lab",
) -> str:
    cluster: dict = {"server": server}
    if ca:
        cluster["certificate-authority-data"] = base64.b64encode(ca.encode()).decode()
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": current,
            "clusters": [{"name": "c", "cluster": cluster}],
            "users": [{"name": "u", "user": user or {"token": "lab-token-123"}}],
            "contexts": [{"name": name, "context": {"cluster": "c", "user": "u"}} for name in contexts],
        }
    )
