"""A real Prometheus server scraping a sandbox cluster's pods, as a cluster's own monitoring does.

    with SandboxCluster(pod_network="isolated") as cluster, SandboxPrometheus(cluster) as prom:
        prom.url  # host-reachable base URL of its HTTP API (/api/v1/query)

Prometheus (Debian's ``prometheus`` package, ``/usr/bin/prometheus``) runs on the pod network: with
the isolated network inside the sandbox's namespace (``ip netns exec``), exposed to the host by a
``LoadBalancer`` Service ``monitoring/prometheus`` with its Endpoints (the sandbox's load balancer
forwards to it), as an operator would expose an in-cluster Prometheus; with the flat network on the
loopback directly. Its targets come from ``file_sd``: a thread lists the cluster's Running pods every
``sync_seconds`` and writes one target per pod (its IP and first container port) with the labels
``namespace`` and ``pod``, the labels kube-prometheus' relabelling gives pod series.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from sandbox.testing import SandboxCluster, SandboxError

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
MONITORING_NAMESPACE = "monitoring"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def targets_from_pods(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """file_sd groups for Running pods with an IP and a container port (pure)."""
    groups = []
    for pod in items:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        ports = [
            p["containerPort"]
            for c in (pod.get("spec") or {}).get("containers") or []
            for p in c.get("ports") or []
            if p.get("containerPort")
        ]
        if (
            status.get("phase") != "Running"
            or not status.get("podIP")
            or not ports
            or meta.get("deletionTimestamp")
        ):
            continue
        if meta.get("namespace") == MONITORING_NAMESPACE:
            continue
        groups.append(
            {
                "targets": [f"{status['podIP']}:{ports[0]}"],
                "labels": {"namespace": meta.get("namespace", ""), "pod": meta.get("name", "")},
            }
        )
    return sorted(groups, key=lambda g: g["targets"][0])


class SandboxPrometheus:
    def __init__(
        self, cluster: SandboxCluster, *, scrape_interval: str = "1s", sync_seconds: float = 0.5
    ) -> None:
        self.cluster = cluster
        self.scrape_interval = scrape_interval
        self.sync_seconds = sync_seconds
        self._tmp = tempfile.TemporaryDirectory(prefix="tandem-prometheus-")
        self.dir = Path(self._tmp.name)
        self.port = _free_port()
        self.url = ""
        self._process: subprocess.Popen[bytes] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._written = ""
        self._core: Any = None

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> SandboxPrometheus:
        if not os.path.exists(PROMETHEUS):
            raise SandboxError("prometheus is not installed (apt-get install -y prometheus)")
        (self.dir / "targets.json").write_text("[]")
        config = {
            "global": {"scrape_interval": self.scrape_interval, "scrape_timeout": self.scrape_interval},
            "scrape_configs": [
                {
                    "job_name": "sandbox-pods",
                    "file_sd_configs": [
                        {"files": [str(self.dir / "targets.json")], "refresh_interval": "1s"}
                    ],
                }
            ],
        }
        (self.dir / "prometheus.yml").write_text(json.dumps(config))
        command = [
            PROMETHEUS,
            f"--config.file={self.dir / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.dir / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        if self.cluster.netns:
            command = ["ip", "netns", "exec", self.cluster.netns, *command]
        log = open(self.dir / "prometheus.log", "wb")  # noqa: SIM115 - closed with the process
        self._process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self._sync_once()
        self._thread = threading.Thread(target=self._sync_loop, name="prometheus-targets", daemon=True)
        self._thread.start()
        self.url = self._expose() if self.cluster.netns else f"http://127.0.0.1:{self.port}"
        self._wait_ready()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._process = None
        self._tmp.cleanup()

    def __enter__(self) -> SandboxPrometheus:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def log(self) -> str:
        path = self.dir / "prometheus.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_for_targets(self, namespace: str, count: int, timeout: float = 60.0) -> None:
        """Until Prometheus has scraped ``count`` pods of ``namespace`` successfully."""
        import urllib.parse
        import urllib.request

        query = urllib.parse.quote(f'count(up{{namespace="{namespace}"}} == 1)')

        def scraped() -> bool:
            url = f"{self.url}/api/v1/query?query={query}"
            with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - http:// built above
                result = json.load(response)["data"]["result"]
            return bool(result) and int(float(result[0]["value"][1])) >= count

        self.cluster.wait_for(scraped, timeout=timeout, interval=0.5, message=f"{count} pods scraped")

    # -- internals ------------------------------------------------------------------------------
    def _expose(self) -> str:
        from kubernetes import client

        core = client.CoreV1Api(self.cluster.api_client())
        # The client takes plain dicts as bodies (its stubs name only the model classes).
        namespace: Any = {"metadata": {"name": MONITORING_NAMESPACE}}
        with contextlib.suppress(client.ApiException):
            core.create_namespace(namespace)
        port = {"name": "web", "port": 9090, "targetPort": self.port, "protocol": "TCP"}
        service: Any = {"metadata": {"name": "prometheus"}, "spec": {"type": "LoadBalancer", "ports": [port]}}
        core.create_namespaced_service(MONITORING_NAMESPACE, service)
        endpoints: Any = {
            "metadata": {"name": "prometheus"},
            "subsets": [
                {
                    "addresses": [{"ip": "127.0.0.1"}],
                    "ports": [{"name": "web", "port": self.port, "protocol": "TCP"}],
                }
            ],
        }
        core.create_namespaced_endpoints(MONITORING_NAMESPACE, endpoints)

        def ingress() -> str | None:
            status = core.read_namespaced_service("prometheus", MONITORING_NAMESPACE).status
            lb = status.load_balancer.ingress if status and status.load_balancer else None
            return lb[0].ip if lb else None

        ip = self.cluster.wait_for(ingress, timeout=20, message="the Prometheus Service's external address")
        return f"http://{ip}:9090"

    def _wait_ready(self, timeout: float = 30.0) -> None:
        import urllib.error
        import urllib.request

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise SandboxError(f"prometheus exited:\n{self.log[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:  # noqa: S310 - http:// built above
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise SandboxError(f"prometheus not ready at {self.url} in {timeout:.0f} s:\n{self.log[-2000:]}")

    def _sync_once(self) -> None:
        from kubernetes import client

        if self._core is None:
            self._core = client.CoreV1Api(self.cluster.api_client())
        api = self._core
        items = api.api_client.sanitize_for_serialization(api.list_pod_for_all_namespaces().items)
        text = json.dumps(targets_from_pods(items))
        if text != self._written:
            temporary = self.dir / "targets.json.tmp"
            temporary.write_text(text)
            os.replace(temporary, self.dir / "targets.json")
            self._written = text

    def _sync_loop(self) -> None:
        while not self._stop.wait(self.sync_seconds):
            with contextlib.suppress(Exception):
                self._sync_once()
