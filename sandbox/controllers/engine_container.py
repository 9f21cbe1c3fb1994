"""The engine container's process (vLLM/SGLang/MindIE, see `containers.is_engine_container`): started
as a simulated engine in the `EngineFarm` with the pod's NPUs and mounted files; an engine that refuses
its arguments, needs a Mooncake master no Service provides, or crashes → terminated, CrashLoopBackOff,
restartCount rising, `BackOff` events and its log lines kept for `pods/log`."""

from __future__ import annotations

from typing import Any

from sandbox.controllers import ascend
from sandbox.controllers import containers as c
from sandbox.controllers.base import now_iso
from sandbox.controllers.pod_state import PodReporter, PodState
from sandbox.engine.farm import EngineFarm
from sandbox.engine.spec import EngineArgumentError, parse_engine_spec


class EngineContainer:
    def __init__(self, reporter: PodReporter, farm: EngineFarm) -> None:
        self.reporter = reporter
        self.api = reporter.api
        self.farm = farm

    async def start(self, state: PodState, pod: dict[str, Any], engine_name: str) -> list[str] | None:
        """Start the simulated engine; the log lines of a failed start otherwise."""
        container = next(ct for ct in pod["spec"]["containers"] if ct["name"] == engine_name)
        self.reporter.container_started(pod, container)
        namespace = pod["metadata"]["namespace"]
        configmaps = {cm["metadata"]["name"]: cm for cm in self.api.store.iter("", "configmaps", namespace)}
        files = c.mounted_files(pod, engine_name, configmaps)
        # As the Ascend device plugin: the pod's NPUs, annotated on it and visible to its engine.
        pod = ascend.hand_out(
            self.api,
            self.api.registry.by_key("", "pods"),
            pod,
            state.node,
            self.reporter.host_ip(state),
            engine_name,
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

    async def crash(
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
        """The engine exited (or never started): CrashLoopBackOff; the next back-off."""
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
        self.reporter.event(
            pod,
            "BackOff",
            f"Back-off restarting failed container {name} in pod {pod_ref}",
            name,
            warning=True,
        )
        return backoff
