"""One sandbox cluster in one process: API server, storage, controllers, kubeconfig."""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import secrets
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from aiohttp import web

from sandbox.apiserver import bootstrap, rbac, tls
from sandbox.apiserver.objects import Api
from sandbox.apiserver.resources import BUILTIN_TYPES, Registry
from sandbox.apiserver.server import ApiServer
from sandbox.apiserver.storage import Store
from sandbox.controllers.manager import ControllerManager
from sandbox.netns import PodNetwork

DEFAULT_ACCELERATOR = ("huawei.com/ascend-1980", 8)


@dataclass
class SandboxOptions:
    nodes: int = 4
    accelerators: list[tuple[str, int]] = field(default_factory=lambda: [DEFAULT_ACCELERATOR])
    node_labels: dict[str, str] = field(default_factory=dict)
    node_cpu: str = "192"
    node_memory: str = "1536Gi"
    kthena: bool = True
    host: str = "127.0.0.1"
    port: int = 0
    tls: bool = False
    token: str | None = None
    kubeconfig: Path | None = None
    watch_window: int = 5000
    max_grace_seconds: float = 5.0
    log_requests: bool = False
    audit_log: Path | None = None
    pod_network: str = "flat"  # or "isolated": pods in a network namespace the host cannot reach


def claim_loopback_net() -> tuple[int, IO[str]]:
    """Pick a free second octet for this sandbox's 127.<net>.x.y addresses.

    Each running sandbox holds an exclusive lock on a file named after its octet, so two
    sandboxes on one machine never hand out the same pod IPs; the lock dies with the process.
    """
    candidates = list(range(2, 255))
    random.shuffle(candidates)
    lock_dir = Path(tempfile.gettempdir())
    for net in candidates:
        handle = open(lock_dir / f"tandem-sandbox-net-{net}.lock", "w")  # noqa: SIM115 - held for the process lifetime
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        return net, handle
    raise RuntimeError("no free 127.x.0.0/16 block left for another sandbox")


class Sandbox:
    def __init__(self, options: SandboxOptions) -> None:
        self.options = options
        self.token = options.token or secrets.token_urlsafe(24)
        self.store = Store(window=options.watch_window)
        self.api = Api(Registry(list(BUILTIN_TYPES)), self.store)
        self.server = ApiServer(
            self.api, self.token, log_requests=options.log_requests, audit_log=options.audit_log
        )
        self.net, self._net_lock = claim_loopback_net()
        self.network = PodNetwork(options.pod_network)
        self.controllers = ControllerManager(self.api, options, self.net, self.network)
        self.server.log_source = self.controllers.pod_logs
        self._runner: web.AppRunner | None = None
        self._workdir = Path(tempfile.mkdtemp(prefix="tandem-sandbox-"))
        self.url = ""
        self.kubeconfig_path = options.kubeconfig or (self._workdir / "kubeconfig")
        self.ca_path: Path | None = None
        self.https_url = ""
        self.https_kubeconfig_path = self.kubeconfig_path

    async def start(self) -> None:
        # Isolated: from here on this thread (and every thread it starts) is on the pod network;
        # only the API server's listeners and load-balancer forwarders are put on the host's.
        self.network.create()
        bootstrap.create_namespaces(self.api)
        rbac.install_default_policy(self.api)
        if self.options.kthena:
            bootstrap.install_crds(self.api)
        certs = tls.generate(self.options.host)
        ssl_context = tls.server_context(certs, self._workdir)
        ca_file = self._workdir / "ca.crt"
        ca_file.write_bytes(certs.ca_pem)
        self._runner = web.AppRunner(
            self.server.app(), access_log=None, handle_signals=False, shutdown_timeout=1.0
        )
        await self._runner.setup()
        host = self.options.host
        main = web.SockSite(
            self._runner,
            self.network.host_listener(host, self.options.port),
            ssl_context=ssl_context if self.options.tls else None,
        )
        await main.start()
        port = self._runner.addresses[0][1]
        self.url = f"{'https' if self.options.tls else 'http'}://{host}:{port}"
        self.server.server_address = f"{host}:{port}"
        tls.write_kubeconfig(
            self.kubeconfig_path, self.url, self.token, certs.ca_pem if self.options.tls else None
        )
        if self.options.tls:
            self.ca_path = ca_file
            self.https_url, self.https_kubeconfig_path = self.url, self.kubeconfig_path
        else:
            # kubectl (client-go's clientcmd) sends no credentials to an http:// server, so a
            # plain-HTTP sandbox also serves HTTPS on a second port with its own kubeconfig.
            secure = web.SockSite(self._runner, self.network.host_listener(host, 0), ssl_context=ssl_context)
            await secure.start()
            self.https_url = f"https://{host}:{self._runner.addresses[1][1]}"
            self.https_kubeconfig_path = self.kubeconfig_path.with_name(self.kubeconfig_path.name + "-https")
            tls.write_kubeconfig(self.https_kubeconfig_path, self.https_url, self.token, certs.ca_pem)
        await self.controllers.start()

    async def stop(self) -> None:
        await self.controllers.stop()
        await self.server.proxy.close()
        if self._runner is not None:
            await self._runner.cleanup()
        if self.server.audit is not None:
            self.server.audit.close()
        self.network.remove()
        with contextlib.suppress(OSError):
            fcntl.flock(self._net_lock, fcntl.LOCK_UN)
            self._net_lock.close()
        for child in self._workdir.iterdir():
            if child != self.kubeconfig_path:
                child.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            if not any(self._workdir.iterdir()):
                os.rmdir(self._workdir)
