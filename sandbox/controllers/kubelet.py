"""The kubelet: runs each scheduled pod's containers and reports their status like a real node.

Per pod: volumes from missing ConfigMaps/Secrets → `FailedMount`, ContainerCreating; the pod IP
(its own 127.<net>.x.y); a container whose env/envFrom names a missing Secret/ConfigMap or key →
CreateContainerConfigError until it exists (init containers first: Init:CreateContainerConfigError);
images with a tag ending in `-broken` → ErrImagePull / ImagePullBackOff;
the engine container (vLLM/SGLang/MindIE, see `containers.is_engine_container`) becomes a
simulated engine (`sandbox.engine.farm.EngineFarm`) — Running once started, Ready once `/health`
answers; an engine that refuses its arguments (argparse: exit 2), needs a Mooncake master no
Service provides, or crashes (exit 1) → terminated, CrashLoopBackOff, restartCount rising,
`BackOff` events, and its log lines in `pods/log`. Other containers (sidecars, plain images) run
and are Ready at once.
Deletion: Terminating until the engine drained in-flight requests (grace period capped by
`--max-grace`), then the pod is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from sandbox.apiserver.errors import ApiError, bad_request
from sandbox.apiserver.objects import Api
from sandbox.controllers import ascend
from sandbox.controllers import containers as c
from sandbox.controllers.base import EventRecorder, IpPool, Reconciler, log, now_iso
from sandbox.engine.farm import EngineFarm
from sandbox.engine.spec import EngineArgumentError, parse_engine_spec

PROBE_INTERVAL = 0.5  # until Ready
READY_PROBE_INTERVAL = 5.0  # once Ready, unless the probe's periodSeconds is shorter (upstream default 10 s)
UNHEALTHY_EVENT_SECONDS = 10.0
SHUTDOWN_DRAIN_SECONDS = 2.0  # in-flight requests get this long when the whole sandbox stops


class _Terminating(Exception):
    pass


@dataclass
class PodState:
    namespace: str
    name: str
    uid: str
    node: str
    ip: str = ""
    started_at: str = ""
    statuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    restarts: dict[str, int] = field(default_factory=dict)
    logs: dict[str, list[str]] = field(default_factory=dict)
    previous_logs: dict[str, list[str]] = field(default_factory=dict)
    engine_running: bool = False
    engine_ready: bool = False
    terminate: asyncio.Event = field(default_factory=asyncio.Event)
    last_unhealthy_event: float = 0.0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class Kubelet(Reconciler):
    name = "kubelet"
    watches = (("", "pods"),)

    def __init__(
        self, api: Api, events: EventRecorder, ips: IpPool, farm: EngineFarm, max_grace: float
    ) -> None:
        super().__init__(api)
        self.events = events
        self.ips = ips
        self.farm = farm
        self.max_grace = max_grace
        self.pods: dict[str, PodState] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._session: aiohttp.ClientSession | None = None

    # -- reconcile: start a worker per bound pod, stop workers of vanished pods ------------------
    async def reconcile(self) -> None:
        live: set[str] = set()
        for pod in self.api.store.iter("", "pods"):
            node = pod.get("spec", {}).get("nodeName")
            if not node:
                continue
            uid = pod["metadata"]["uid"]
            live.add(uid)
            state = self.pods.get(uid)
            if state is None:
                state = PodState(pod["metadata"]["namespace"], pod["metadata"]["name"], uid, node)
                self.pods[uid] = state
                self._tasks[uid] = asyncio.create_task(self._run(state), name=f"kubelet {state.key}")
            if pod["metadata"].get("deletionTimestamp"):
                state.terminate.set()
        for uid in [u for u in self.pods if u not in live]:
            state = self.pods.pop(uid)
            task = self._tasks.pop(uid, None)
            if task is not None and not task.done():
                task.cancel()
            await self.farm.stop(state.key, 0)
            if state.ip != self._host_ip(state):
                self.ips.release(state.ip)

    def _host_ip(self, state: PodState) -> str:
        return f"127.{self.ips.net}.0.{state.node.rsplit('-', 1)[-1]}"

    async def close(self) -> None:
        """Shutdown: stop the pod workers, then let every engine drain briefly (all at once)."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        running = [s.key for s in self.pods.values() if s.engine_running]
        await asyncio.gather(*(self.farm.stop(key, SHUTDOWN_DRAIN_SECONDS) for key in running))
        if self._session is not None:
            await self._session.close()

    # -- logs -----------------------------------------------------------------------------------
    def pod_logs(self, namespace: str, name: str, container: str | None, previous: bool) -> list[str]:
        pod = self.api.find(self.rt("", "pods"), namespace, name)
        assert pod is not None
        names = [ct["name"] for ct in pod["spec"].get("containers") or []]
        inits = [ct["name"] for ct in pod["spec"].get("initContainers") or []]
        if container is None:
            if len(names) != 1:
                also = f" or one of the init containers: [{' '.join(inits)}]" if inits else ""
                raise bad_request(
                    f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]"
                    + also
                )
            container = names[0]
        if container not in names and container not in inits:
            raise bad_request(f"container {container} is not valid for pod {name}")
        state = self.pods.get(pod["metadata"]["uid"])
        if state is None:
            raise bad_request(
                f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating'
            )
        if previous:
            if container not in state.previous_logs:
                raise bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
            return state.previous_logs[container]
        if container == c.engine_container_name(pod) and state.engine_running:
            return self.farm.logs(state.key)
        if container in state.logs:
            return state.logs[container]
        reason = (
            state.statuses.get(container, {})
            .get("state", {})
            .get("waiting", {})
            .get("reason", "ContainerCreating")
        )
        if reason in ("ErrImagePull", "ImagePullBackOff"):
            reason = "trying and failing to pull image"
        raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: {reason}')

    # -- the pod worker -------------------------------------------------------------------------
    def _current(self, state: PodState) -> dict[str, Any]:
        """The stored pod, not copied: read it, never mutate it."""
        pod = self.api.store.peek("", "pods", state.namespace, state.name)
        if pod is None or pod["metadata"]["uid"] != state.uid:
            raise asyncio.CancelledError
        return pod

    async def _sleep(self, state: PodState, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(state.terminate.wait(), timeout=seconds)
        if state.terminate.is_set():
            raise _Terminating

    async def _run(self, state: PodState) -> None:
        try:
            await self._lifecycle(state)
        except _Terminating:
            await self._terminate(state)
        except asyncio.CancelledError:
            raise
        except ApiError as exc:
            log.debug("kubelet %s: %s", state.key, exc.message)
        except Exception:
            log.exception("kubelet failed running %s", state.key)

    def _write(
        self, state: PodState, pod: dict[str, Any], phase: str, extra: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        status = c.pod_status(pod, state.statuses, phase, self._host_ip(state), state.ip, state.started_at)
        status.update(extra or {})
        return self.api.write_status(self.rt("", "pods"), pod, status, self.name)

    def _event(
        self,
        pod: dict[str, Any],
        reason: str,
        message: str,
        container: str | None = None,
        warning: bool = False,
    ) -> None:
        field_path = f"spec.containers{{{container}}}" if container else None
        self.events.record(
            pod,
            reason,
            message,
            type="Warning" if warning else "Normal",
            host=pod["spec"].get("nodeName"),
            field_path=field_path,
        )

    async def _lifecycle(self, state: PodState) -> None:
        pod = self._current(state)
        if pod["metadata"].get("deletionTimestamp"):
            raise _Terminating
        backoff = 0.0
        while True:
            missing = self._missing_volumes(pod)
            if not missing:
                break
            for volume, kind, obj_name in missing:
                self._event(
                    pod,
                    "FailedMount",
                    f'MountVolume.SetUp failed for volume "{volume}" : {kind} "{obj_name}" not found',
                    warning=True,
                )
            pod = self._write(state, pod, "Pending")
            backoff = c.next_backoff(backoff)
            await self._sleep(state, backoff)
            pod = self._current(state)
        if pod["spec"].get("hostNetwork"):
            state.ip = self._host_ip(state)  # the node's address, shared with its other host-network pods
        else:
            state.ip = self.ips.allocate("pod")
        state.started_at = now_iso()
        pod = await self._init_config(state, pod)
        init = [
            {
                "name": ic["name"],
                "image": ic["image"],
                "imageID": "",
                "ready": True,
                "started": False,
                "restartCount": 0,
                "state": c.terminated(0, "Completed", state.started_at),
            }
            for ic in pod["spec"].get("initContainers") or []
        ]
        # Init containers ran to completion before the others started; their logs stay readable, as on
        # a real node (kubectl logs -c NAME, --all-containers).
        for ic in pod["spec"].get("initContainers") or []:
            state.logs[ic["name"]] = [
                f"{state.started_at} INFO init container {ic['name']} started ({ic['image']})",
                f"{state.started_at} INFO init container {ic['name']} completed",
            ]
        pod = self._write(state, pod, "Pending", {"initContainerStatuses": init} if init else None)
        engine_name = (
            c.engine_container_name(pod)
            if any(c.is_engine_container(ct) for ct in pod["spec"]["containers"])
            else None
        )
        broken = {
            ct["name"]: ct["image"] for ct in pod["spec"]["containers"] if c.image_is_broken(ct["image"])
        }
        # The image is pulled before the container's config (env from Secrets/ConfigMaps) is built.
        blocked = {
            ct["name"]: error
            for ct in pod["spec"]["containers"]
            if ct["name"] not in broken and (error := self._config_error(pod, ct))
        }
        for ct in pod["spec"]["containers"]:
            if ct["name"] in broken or ct["name"] == engine_name or ct["name"] in blocked:
                continue
            self._start_plain(state, pod, ct)
        config_backoff = 0.0
        next_config_try = 0.0
        pull_backoff = 0.0
        next_pull = 0.0
        pull_switch_at = 0.0
        engine_backoff = 0.0
        next_engine_try = 0.0
        while True:
            now = time.monotonic()
            pod = self._current(state)
            if broken and now >= next_pull:
                for name, image in broken.items():
                    self._event(pod, "Pulling", f'Pulling image "{image}"', name)
                    self._event(
                        pod,
                        "Failed",
                        f'Failed to pull image "{image}": rpc error: code = NotFound desc = failed to '
                        f'pull and unpack image "{image}": failed to resolve reference "{image}": '
                        f"{image}: not found",
                        name,
                        warning=True,
                    )
                    self._event(pod, "Failed", "Error: ErrImagePull", name, warning=True)
                    state.statuses[name] = c.waiting(
                        name, image, "ErrImagePull", f'failed to pull and unpack image "{image}": not found'
                    )
                pull_backoff = c.next_backoff(pull_backoff)
                next_pull = now + pull_backoff + 0.5
                pull_switch_at = now + 0.5
            elif broken and pull_switch_at and now >= pull_switch_at:
                for name, image in broken.items():
                    self._event(pod, "BackOff", f'Back-off pulling image "{image}"', name)
                    self._event(pod, "Failed", "Error: ImagePullBackOff", name, warning=True)
                    state.statuses[name] = c.waiting(
                        name, image, "ImagePullBackOff", f'Back-off pulling image "{image}"'
                    )
                pull_switch_at = 0.0
            if blocked and now >= next_config_try:
                self._retry_config(state, pod, blocked, engine_name)
                config_backoff = c.next_backoff(config_backoff)
                next_config_try = now + config_backoff
            if engine_name and engine_name not in broken and engine_name not in blocked:
                if state.engine_running:
                    await self._probe(state, pod, engine_name)
                    if self.farm.has_crashed(state.key):
                        engine_backoff = await self._crash(
                            state, pod, engine_name, self.farm.logs(state.key), 137, engine_backoff, stop=True
                        )
                        next_engine_try = time.monotonic() + engine_backoff
                elif now >= next_engine_try:
                    failure = await self._start_engine(state, pod, engine_name)
                    if failure is not None:
                        engine_backoff = await self._crash(
                            state, pod, engine_name, failure, c.exit_code(failure), engine_backoff, stop=False
                        )
                        next_engine_try = time.monotonic() + engine_backoff
            self._write(state, pod, c.phase(pod, state.statuses))
            steady = state.engine_ready or (engine_name is None and not broken and not blocked)
            await self._sleep(state, self._period(pod, engine_name) if steady else PROBE_INTERVAL)

    @staticmethod
    def _period(pod: dict[str, Any], engine_name: str | None) -> float:
        containers: list[dict[str, Any]] = pod["spec"]["containers"]
        container = next((ct for ct in containers if ct["name"] == engine_name), {})
        period = (container.get("readinessProbe") or {}).get("periodSeconds")
        return min(READY_PROBE_INTERVAL, max(1.0, float(period))) if period else READY_PROBE_INTERVAL

    def _config_error(self, pod: dict[str, Any], container: dict[str, Any]) -> str | None:
        namespace = pod["metadata"]["namespace"]

        def lookup(kind: str, name: str) -> dict[str, Any] | None:
            plural = "secrets" if kind == "secret" else "configmaps"
            return self.api.store.peek("", plural, namespace, name)

        return c.env_config_error(container, namespace, lookup)

    def _config_failed(self, pod: dict[str, Any], container: dict[str, Any], error: str) -> dict[str, Any]:
        """The events and status of a container whose config cannot be built (kuberuntime's startContainer:
        the image is present, generateContainerConfig fails)."""
        name, image = container["name"], container["image"]
        self._event(pod, "Pulled", f'Container image "{image}" already present on machine', name)
        self._event(pod, "Failed", f"Error: {error}", name, warning=True)
        return c.waiting(name, image, "CreateContainerConfigError", error)

    def _start_plain(self, state: PodState, pod: dict[str, Any], container: dict[str, Any]) -> None:
        """A container that is not the engine (sidecar, plain image): running and Ready at once."""
        name, image = container["name"], container["image"]
        self._pulled_created_started(pod, container)
        state.statuses[name] = c.running(name, image, now_iso(), ready=True)
        state.logs[name] = [f"{now_iso()} INFO container {name} started ({image})"]

    def _retry_config(
        self, state: PodState, pod: dict[str, Any], blocked: dict[str, str], engine_name: str | None
    ) -> None:
        """Try again to build the config of containers that could not start: a Secret or ConfigMap created
        meanwhile lets them start, as on a real node (no redeploy needed)."""
        for container in pod["spec"]["containers"]:
            name = container["name"]
            if name not in blocked:
                continue
            error = self._config_error(pod, container)
            if error is None:
                del blocked[name]
                state.statuses.pop(name, None)
                if name != engine_name:
                    self._start_plain(state, pod, container)
                continue
            blocked[name] = error
            state.statuses[name] = self._config_failed(pod, container, error)

    async def _init_config(self, state: PodState, pod: dict[str, Any]) -> dict[str, Any]:
        """Hold the pod in Init:CreateContainerConfigError while an init container's env references a
        missing Secret/ConfigMap (or key); init containers run in order, so the first such one blocks."""
        backoff = 0.0
        while True:
            inits = pod["spec"].get("initContainers") or []
            failing = next(
                ((i, error) for i, ic in enumerate(inits) if (error := self._config_error(pod, ic))), None
            )
            if failing is None:
                state.statuses.clear()
                return pod
            index, error = failing
            statuses: list[dict[str, Any]] = []
            for i, ic in enumerate(inits):
                if i < index:
                    done = c.waiting(ic["name"], ic["image"], "Completed")
                    done.update(ready=True, state=c.terminated(0, "Completed", state.started_at))
                    statuses.append(done)
                elif i == index:
                    statuses.append(self._config_failed(pod, ic, error))
                else:
                    statuses.append(c.waiting(ic["name"], ic["image"], "PodInitializing"))
            for ct in pod["spec"]["containers"]:
                state.statuses[ct["name"]] = c.waiting(ct["name"], ct["image"], "PodInitializing")
            pod = self._write(state, pod, "Pending", {"initContainerStatuses": statuses})
            backoff = c.next_backoff(backoff)
            await self._sleep(state, backoff)
            pod = self._current(state)

    def _missing_volumes(self, pod: dict[str, Any]) -> list[tuple[str, str, str]]:
        namespace = pod["metadata"]["namespace"]
        return [
            (volume, kind, name)
            for volume, kind, name in c.referenced_volumes(pod)
            if self.api.store.peek("", "configmaps" if kind == "configmap" else "secrets", namespace, name)
            is None
        ]

    def _pulled_created_started(self, pod: dict[str, Any], container: dict[str, Any]) -> None:
        name, image = container["name"], container["image"]
        if container.get("imagePullPolicy") == "Always":
            self._event(pod, "Pulling", f'Pulling image "{image}"', name)
            self._event(
                pod,
                "Pulled",
                f'Successfully pulled image "{image}" in 412ms (412ms including waiting). '
                "Image size: 1073741824 bytes.",
                name,
            )
        else:
            self._event(pod, "Pulled", f'Container image "{image}" already present on machine', name)
        self._event(pod, "Created", f"Created container: {name}", name)
        self._event(pod, "Started", f"Started container {name}", name)

    async def _start_engine(self, state: PodState, pod: dict[str, Any], engine_name: str) -> list[str] | None:
        """Start the simulated engine; the log lines of a failed start otherwise."""
        container = next(ct for ct in pod["spec"]["containers"] if ct["name"] == engine_name)
        self._pulled_created_started(pod, container)
        namespace = pod["metadata"]["namespace"]
        configmaps = {cm["metadata"]["name"]: cm for cm in self.api.store.iter("", "configmaps", namespace)}
        files = c.mounted_files(pod, engine_name, configmaps)
        # As the Ascend device plugin: the pod's NPUs, annotated on it and visible to its engine.
        pod = ascend.hand_out(
            self.api, self.rt("", "pods"), pod, state.node, self._host_ip(state), engine_name
        )
        try:
            spec = parse_engine_spec(pod, files)
        except EngineArgumentError as exc:
            return str(exc).splitlines() or [type(exc).__name__]
        if spec.mooncake_master:
            master = spec.mooncake_master
            host = master.rpartition(":")[0] or master
            if c.service_for_host(host, namespace, self.api.store.iter("", "services")) is None:
                return [
                    f"{now_iso()} INFO Creating v1 connector with name: {spec.kv_connector}",
                    f"{now_iso()} ERROR [mooncake] Failed to connect to Mooncake master at {master}: "
                    f'could not resolve host "{host}" (no Service "{host.split(".")[0]}" in the cluster; '
                    "is the Mooncake master deployed?)",
                    f"{now_iso()} ERROR RuntimeError: Mooncake store setup failed: "
                    f"master {master} unreachable",
                ]
        labels = dict(pod["metadata"].get("labels") or {})
        try:
            await self.farm.start(state.key, state.ip, spec, labels)
        except EngineArgumentError as exc:
            return self.farm.logs(state.key) or [str(exc)]
        except OSError as exc:
            return self.farm.logs(state.key) or [f"ERROR: {exc}"]
        state.engine_running = True
        state.engine_ready = False
        state.statuses[engine_name] = c.running(
            engine_name,
            container["image"],
            now_iso(),
            False,
            state.restarts.get(engine_name, 0),
            state.statuses.get(engine_name, {}).get("lastState"),
        )
        state.logs.pop(engine_name, None)
        return None

    async def _crash(
        self,
        state: PodState,
        pod: dict[str, Any],
        name: str,
        lines: list[str],
        exit_code: int,
        backoff: float,
        *,
        stop: bool,
    ) -> float:
        if stop:
            await self.farm.stop(state.key, 0)
        state.engine_running = False
        state.engine_ready = False
        image = next(ct["image"] for ct in pod["spec"]["containers"] if ct["name"] == name)
        if name in state.logs or stop:
            state.previous_logs[name] = state.logs.get(name, lines)
        state.logs[name] = lines
        restarts = state.restarts.get(name, 0) + 1
        state.restarts[name] = restarts
        previous = (
            state.statuses.get(name, {}).get("state", {}).get("running", {}).get("startedAt", now_iso())
        )
        last = c.terminated(exit_code, "Error", previous, lines[-1] if lines else "")
        backoff = c.next_backoff(backoff)
        meta = pod["metadata"]
        pod_ref = f"{meta['name']}_{meta['namespace']}({meta['uid']})"
        message = f"back-off {int(backoff)}s restarting failed container={name} pod={pod_ref}"
        state.statuses[name] = c.waiting(name, image, "CrashLoopBackOff", message, restarts, last)
        self._event(
            pod,
            "BackOff",
            f"Back-off restarting failed container {name} in pod {pod_ref}",
            name,
            warning=True,
        )
        return backoff

    async def _probe(self, state: PodState, pod: dict[str, Any], name: str) -> None:
        address = self.farm.address(state.key)
        if address is None:
            return
        container = next(ct for ct in pod["spec"]["containers"] if ct["name"] == name)
        probe = (container.get("readinessProbe") or {}).get("httpGet") or {}
        path = probe.get("path") or "/health"
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2))
        ok = False
        detail = "connection refused"
        try:
            async with self._session.get(f"http://{address[0]}:{address[1]}{path}") as response:
                ok = 200 <= response.status < 400
                detail = f"HTTP probe failed with statuscode: {response.status}"
        except (aiohttp.ClientError, TimeoutError) as exc:
            detail = f'Get "http://{address[0]}:{address[1]}{path}": {exc}'
        if ok != state.engine_ready:
            state.engine_ready = ok
            status = state.statuses[name]
            state.statuses[name] = {**status, "ready": ok}
        if not ok and time.monotonic() - state.last_unhealthy_event > UNHEALTHY_EVENT_SECONDS:
            state.last_unhealthy_event = time.monotonic()
            self._event(pod, "Unhealthy", f"Readiness probe failed: {detail}", name, warning=True)

    async def _terminate(self, state: PodState) -> None:
        rt = self.rt("", "pods")
        pod = self.api.find(rt, state.namespace, state.name)
        if pod is None or pod["metadata"]["uid"] != state.uid:
            return
        grace = min(float(pod["metadata"].get("deletionGracePeriodSeconds") or 30), self.max_grace)
        for name, status in state.statuses.items():
            if "running" in status.get("state", {}):
                self._event(pod, "Killing", f"Stopping container {name}", name)
        if state.engine_running:
            await self.farm.stop(state.key, grace)
            state.engine_running = False
        self.api.remove_now(rt, state.namespace, state.name)
