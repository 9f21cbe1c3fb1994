"""`SandboxCluster`: a sandbox cluster in a subprocess, for tests, benchmarks and the demo.

with SandboxCluster(nodes=2, accelerators=["nvidia.com/gpu=8"]) as cluster:
    cluster.kubectl("get", "nodes")
    core = kubernetes.client.CoreV1Api(cluster.api_client())
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

KUBECTL = "/usr/bin/kubectl"
READY_PREFIX = "sandbox ready: "


class SandboxError(RuntimeError):
    pass


class SandboxCluster:
    def __init__(
        self,
        *,
        nodes: int = 4,
        accelerators: Sequence[str] = ("huawei.com/ascend-1980=8",),
        node_labels: Sequence[str] = (),
        kthena: bool = True,
        tls: bool = False,
        token: str | None = None,
        extra_args: Sequence[str] = (),
        startup_timeout: float = 30.0,
        pod_network: str = "flat",
        env: Mapping[str, str] | None = None,
    ) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="tandem-sandbox-test-")
        self.kubeconfig_path = Path(self._tmp.name) / "kubeconfig"
        self.args = [sys.executable, "-m", "sandbox", "up", "--port", "0", "--nodes", str(nodes)]
        self.args += ["--kubeconfig", str(self.kubeconfig_path)]
        for accelerator in accelerators:
            self.args += ["--accelerator", accelerator]
        for label in node_labels:
            self.args += ["--node-label", label]
        if not kthena:
            self.args.append("--no-kthena")
        if tls:
            self.args.append("--tls")
        if token:
            self.args += [f"--token={token}"]
        if pod_network != "flat":
            self.args += ["--pod-network", pod_network]
        self.args += list(extra_args)
        self.pod_network = pod_network
        self.env = dict(env or {})  # added to the sandbox process's environment (SANDBOX_REAL_ENGINES=vllm)
        self.netns = ""  # the pod network's namespace when isolated (`ip netns exec NETNS ...`)
        self.tls = tls
        self.startup_timeout = startup_timeout
        self.server = ""
        self.token = ""
        self.ca_path: Path | None = None
        self._process: subprocess.Popen[str] | None = None
        self._output: list[str] = []

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> SandboxCluster:
        root = Path(__file__).resolve().parent.parent
        env = {
            **os.environ,
            **self.env,
            "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        }
        self._process = subprocess.Popen(
            self.args,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=root,
            env=env,
            start_new_session=True,
        )
        ready = threading.Event()
        threading.Thread(target=self._pump, args=(ready,), daemon=True).start()
        if not ready.wait(self.startup_timeout) or not self.server:
            self.stop()
            raise SandboxError("sandbox did not become ready:\n" + "".join(self._output[-40:]))
        config = yaml.safe_load(self.kubeconfig_path.read_text())
        self.token = config["users"][0]["user"]["token"]
        if self.tls:
            self.ca_path = Path(self._tmp.name) / "ca.crt"
            import base64

            self.ca_path.write_bytes(
                base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"])
            )
        return self

    def _pump(self, ready: threading.Event) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            self._output.append(line)
            if len(self._output) > 2000:
                del self._output[:1000]
            if line.startswith(READY_PREFIX):
                fields = dict(part.split("=", 1) for part in line[len(READY_PREFIX) :].split())
                self.server = fields["server"]
                self.netns = fields.get("netns", "")
                ready.set()
        ready.set()

    def stop(self, timeout: float = 10.0) -> int | None:
        process = self._process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._process = None
        self._tmp.cleanup()
        if self.netns:  # normally removed by the sandbox itself; not when it was killed
            from sandbox.netns import remove_leftovers

            remove_leftovers()
        return process.returncode

    def __enter__(self) -> SandboxCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def output(self) -> str:
        """What the sandbox process printed so far (for failure messages)."""
        return "".join(self._output)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    # -- API server faults (sandbox/apiserver/faults.py) ---------------------------------------
    def api_fault(self, kind: str, **options: Any) -> dict[str, Any]:
        """Inject a fault into the API server (5xx, 429 + Retry-After, latency, freeze, watch 410)."""
        status, answer = self._fault_call("POST", {"kind": kind, **options})
        if status != 201:
            raise SandboxError(f"API server refused the fault: {answer}")
        return dict(answer["fault"])

    def api_faults(self) -> list[dict[str, Any]]:
        return list(self._fault_call("GET")[1]["faults"])

    def clear_api_faults(self, kind: str | None = None) -> int:
        """Remove the API server's faults (all, or of one kind); frozen requests are then answered."""
        return int(self._fault_call("DELETE", query=f"?kind={kind}" if kind else "")[1]["cleared"])

    def _fault_call(
        self, method: str, body: dict[str, Any] | None = None, query: str = ""
    ) -> tuple[int, Any]:
        from sandbox.apiserver.faults import CONTROL_PATH
        from sandbox.faultclient import call

        return call(self.server, self.token, method, CONTROL_PATH + query, body, ca_path=self.ca_path)

    # -- clients ------------------------------------------------------------------------------
    @property
    def kubectl_kubeconfig_path(self) -> Path:
        """kubectl sends no token to an http:// server, so it talks to the HTTPS listener."""
        if self.tls:
            return self.kubeconfig_path
        return self.kubeconfig_path.with_name(self.kubeconfig_path.name + "-https")

    def kubectl(
        self, *args: str, input: str | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [KUBECTL, "--kubeconfig", str(self.kubectl_kubeconfig_path), *args],
            capture_output=True,
            text=True,
            input=input,
            timeout=timeout,
            check=False,
        )

    def api_client(self, token: str | None = None) -> ApiClient:
        """A client of the official library, as the admin or (``token``) as another identity."""
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = self.server
        configuration.api_key = {"authorization": token or self.token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        if self.ca_path is not None:
            configuration.ssl_ca_cert = str(self.ca_path)
        return client.ApiClient(configuration)

    def service_account_token(self, namespace: str, name: str, *, expiration_seconds: int = 3600) -> str:
        """A token for the ServiceAccount through the TokenRequest API (what `kubectl create token` calls)."""
        from kubernetes import client

        core = client.CoreV1Api(self.api_client())
        body = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=expiration_seconds)
        )
        status = core.create_namespaced_service_account_token(name, namespace, body).status
        if status is None:
            raise SandboxError(f"the TokenRequest for {namespace}/{name} came back without a token")
        return str(status.token)

    def service_account_kubeconfig(self, token: str, path: Path) -> Path:
        """A kubeconfig for kubectl (HTTPS listener) that authenticates with ``token``."""
        config = yaml.safe_load(self.kubectl_kubeconfig_path.read_text())
        config["users"][0]["user"] = {"token": token}
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    def wait_for(
        self, predicate: Any, timeout: float = 30.0, interval: float = 0.1, message: str = ""
    ) -> Any:
        """Poll `predicate()` until it returns something truthy; raise with `message` on timeout."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            last = predicate()
            if last:
                return last
            time.sleep(interval)
        raise AssertionError(f"timed out after {timeout}s waiting for {message or predicate}: last={last!r}")
