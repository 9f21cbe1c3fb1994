"""The kubelet: runs each scheduled pod's containers and reports their status like a real node.

Per pod: volumes from missing ConfigMaps/Secrets → `FailedMount`, ContainerCreating; the pod IP
(its own 127.<net>.x.y); a container whose env/envFrom names a missing Secret/ConfigMap or key →
CreateContainerConfigError until it exists (init containers first: Init:CreateContainerConfigError);
images with a tag ending in `-broken` → ErrImagePull / ImagePullBackOff (all in `container_setup`);
the engine container (vLLM/SGLang/MindIE, see `containers.is_engine_container`) becomes a
simulated engine (`sandbox.engine.farm.EngineFarm`) — Running once started, Ready once `/health`
answers (`probes`); an engine that refuses its arguments (argparse: exit 2), needs a Mooncake master no
Service provides, or crashes (exit 1) → terminated, CrashLoopBackOff, restartCount rising,
`BackOff` events, and its log lines in `pods/log` (`engine_container`). Other containers (sidecars,
plain images) run and are Ready at once.
Deletion: Terminating until the engine drained in-flight requests (grace period capped by
`--max-grace`), then the pod is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from sandbox.apiserver.errors import ApiError, bad_request
from sandbox.apiserver.objects import Api
from sandbox.controllers import containers as c
from sandbox.controllers.base import EventRecorder, IpPool, Reconciler, log, now_iso
from sandbox.controllers.container_setup import ContainerSetup
from sandbox.controllers.engine_container import EngineContainer
from sandbox.controllers.pod_state import PodReporter, PodState, Terminating, sleep_unless_deleted
from sandbox.controllers.probes import PROBE_INTERVAL, ReadinessProber, probe_period
from sandbox.engine.farm import EngineFarm

SHUTDOWN_DRAIN_SECONDS = 2.0  # in-flight requests get this long when the whole sandbox stops


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
        self.reporter = PodReporter(api, events, ips, self.name)
        self.setup = ContainerSetup(self.reporter)
        self.engine = EngineContainer(self.reporter, farm)
        self.prober = ReadinessProber(self.reporter, farm)

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
            if state.ip != self.reporter.host_ip(state):
                self.ips.release(state.ip)

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
        await self.prober.close()

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
    async def _run(self, state: PodState) -> None:
        try:
            await self._lifecycle(state)
        except Terminating:
            await self._terminate(state)
        except asyncio.CancelledError:
            raise
        except ApiError as exc:
            log.debug("kubelet %s: %s", state.key, exc.message)
        except Exception:
            log.exception("kubelet failed running %s", state.key)

    async def _lifecycle(self, state: PodState) -> None:
        pod = self.reporter.current(state)
        if pod["metadata"].get("deletionTimestamp"):
            raise Terminating
        backoff = 0.0
        while True:
            missing = self.setup.missing_volumes(pod)
            if not missing:
                break
            self.setup.report_missing_volumes(pod, missing)
            pod = self.reporter.write(state, pod, "Pending")
            backoff = c.next_backoff(backoff)
            await sleep_unless_deleted(state, backoff)
            pod = self.reporter.current(state)
        if pod["spec"].get("hostNetwork"):
            state.ip = self.reporter.host_ip(
                state
            )  # the node's address, shared with its other host-network pods
        else:
            state.ip = self.ips.allocate("pod")
        state.started_at = now_iso()
        pod = await self.setup.init_config(state, pod)
        init = self.setup.init_completed(state, pod)
        pod = self.reporter.write(state, pod, "Pending", {"initContainerStatuses": init} if init else None)
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
            if ct["name"] not in broken and (error := self.setup.config_error(pod, ct))
        }
        for ct in pod["spec"]["containers"]:
            if ct["name"] in broken or ct["name"] == engine_name or ct["name"] in blocked:
                continue
            self.setup.start_plain(state, pod, ct)
        config_backoff = 0.0
        next_config_try = 0.0
        pull_backoff = 0.0
        next_pull = 0.0
        pull_switch_at = 0.0
        engine_backoff = 0.0
        next_engine_try = 0.0
        while True:
            now = time.monotonic()
            pod = self.reporter.current(state)
            if broken and now >= next_pull:
                self.setup.pull_failed(state, pod, broken)
                pull_backoff = c.next_backoff(pull_backoff)
                next_pull = now + pull_backoff + 0.5
                pull_switch_at = now + 0.5
            elif broken and pull_switch_at and now >= pull_switch_at:
                self.setup.pull_backing_off(state, pod, broken)
                pull_switch_at = 0.0
            if blocked and now >= next_config_try:
                self.setup.retry_config(state, pod, blocked, engine_name)
                config_backoff = c.next_backoff(config_backoff)
                next_config_try = now + config_backoff
            if engine_name and engine_name not in broken and engine_name not in blocked:
                if state.engine_running:
                    await self.prober.probe(state, pod, engine_name)
                    if self.farm.has_crashed(state.key):
                        engine_backoff = await self.engine.crash(
                            state, pod, engine_name, self.farm.logs(state.key), 137, engine_backoff, stop=True
                        )
                        next_engine_try = time.monotonic() + engine_backoff
                elif now >= next_engine_try:
                    failure = await self.engine.start(state, pod, engine_name)
                    if failure is not None:
                        engine_backoff = await self.engine.crash(
                            state, pod, engine_name, failure, c.exit_code(failure), engine_backoff, stop=False
                        )
                        next_engine_try = time.monotonic() + engine_backoff
            self.reporter.write(state, pod, c.phase(pod, state.statuses))
            steady = state.engine_ready or (engine_name is None and not broken and not blocked)
            await sleep_unless_deleted(state, probe_period(pod, engine_name) if steady else PROBE_INTERVAL)

    async def _terminate(self, state: PodState) -> None:
        rt = self.rt("", "pods")
        pod = self.api.find(rt, state.namespace, state.name)
        if pod is None or pod["metadata"]["uid"] != state.uid:
            return
        grace = min(float(pod["metadata"].get("deletionGracePeriodSeconds") or 30), self.max_grace)
        for name, status in state.statuses.items():
            if "running" in status.get("state", {}):
                self.reporter.event(pod, "Killing", f"Stopping container {name}", name)
        if state.engine_running:
            await self.farm.stop(state.key, grace)
            state.engine_running = False
        self.api.remove_now(rt, state.namespace, state.name)
