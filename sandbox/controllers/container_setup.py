"""What stands between a scheduled pod and its running containers, as a kubelet sees it: volumes from
missing ConfigMaps/Secrets, images that cannot be pulled, an env that names a missing Secret/ConfigMap
or key (init containers first), and the plain containers (sidecars, plain images) started once their
config can be built."""

from __future__ import annotations

from typing import Any

from sandbox.controllers import containers as c
from sandbox.controllers.base import now_iso
from sandbox.controllers.pod_state import PodReporter, PodState, sleep_unless_deleted


class ContainerSetup:
    def __init__(self, reporter: PodReporter) -> None:
        self.reporter = reporter
        self.api = reporter.api

    def missing_volumes(self, pod: dict[str, Any]) -> list[tuple[str, str, str]]:
        namespace = pod["metadata"]["namespace"]
        return [
            (volume, kind, name)
            for volume, kind, name in c.referenced_volumes(pod)
            if self.api.store.peek("", "configmaps" if kind == "configmap" else "secrets", namespace, name)
            is None
        ]

    def report_missing_volumes(self, pod: dict[str, Any], missing: list[tuple[str, str, str]]) -> None:
        for volume, kind, obj_name in missing:
            self.reporter.event(
                pod,
                "FailedMount",
                f'MountVolume.SetUp failed for volume "{volume}" : {kind} "{obj_name}" not found',
                warning=True,
            )

    def pull_failed(self, state: PodState, pod: dict[str, Any], broken: dict[str, str]) -> None:
        """Each unpullable image tried again and failed: ErrImagePull."""
        for name, image in broken.items():
            self.reporter.event(pod, "Pulling", f'Pulling image "{image}"', name)
            self.reporter.event(
                pod,
                "Failed",
                f'Failed to pull image "{image}": rpc error: code = NotFound desc = failed to '
                f'pull and unpack image "{image}": failed to resolve reference "{image}": '
                f"{image}: not found",
                name,
                warning=True,
            )
            self.reporter.event(pod, "Failed", "Error: ErrImagePull", name, warning=True)
            state.statuses[name] = c.waiting(
                name, image, "ErrImagePull", f'failed to pull and unpack image "{image}": not found'
            )

    def pull_backing_off(self, state: PodState, pod: dict[str, Any], broken: dict[str, str]) -> None:
        """Between two pulls of an unpullable image: ImagePullBackOff."""
        for name, image in broken.items():
            self.reporter.event(pod, "BackOff", f'Back-off pulling image "{image}"', name)
            self.reporter.event(pod, "Failed", "Error: ImagePullBackOff", name, warning=True)
            state.statuses[name] = c.waiting(
                name, image, "ImagePullBackOff", f'Back-off pulling image "{image}"'
            )

    def config_error(self, pod: dict[str, Any], container: dict[str, Any]) -> str | None:
        namespace = pod["metadata"]["namespace"]

        def lookup(kind: str, name: str) -> dict[str, Any] | None:
            plural = "secrets" if kind == "secret" else "configmaps"
            return self.api.store.peek("", plural, namespace, name)

        return c.env_config_error(container, namespace, lookup)

    def config_failed(self, pod: dict[str, Any], container: dict[str, Any], error: str) -> dict[str, Any]:
        """The events and status of a container whose config cannot be built (kuberuntime's startContainer:
        the image is present, generateContainerConfig fails)."""
        name, image = container["name"], container["image"]
        self.reporter.event(pod, "Pulled", f'Container image "{image}" already present on machine', name)
        self.reporter.event(pod, "Failed", f"Error: {error}", name, warning=True)
        return c.waiting(name, image, "CreateContainerConfigError", error)

    def start_plain(self, state: PodState, pod: dict[str, Any], container: dict[str, Any]) -> None:
        """A container that is not the engine (sidecar, plain image): running and Ready at once."""
        name, image = container["name"], container["image"]
        self.reporter.container_started(pod, container)
        state.statuses[name] = c.running(name, image, now_iso(), ready=True)
        state.logs[name] = [f"{now_iso()} INFO container {name} started ({image})"]

    def retry_config(
        self, state: PodState, pod: dict[str, Any], blocked: dict[str, str], engine_name: str | None
    ) -> None:
        """Try again to build the config of containers that could not start: a Secret or ConfigMap created
        meanwhile lets them start, as on a real node (no redeploy needed)."""
        for container in pod["spec"]["containers"]:
            name = container["name"]
            if name not in blocked:
                continue
            error = self.config_error(pod, container)
            if error is None:
                del blocked[name]
                state.statuses.pop(name, None)
                if name != engine_name:
                    self.start_plain(state, pod, container)
                continue
            blocked[name] = error
            state.statuses[name] = self.config_failed(pod, container, error)

    async def init_config(self, state: PodState, pod: dict[str, Any]) -> dict[str, Any]:
        """Hold the pod in Init:CreateContainerConfigError while an init container's env references a
        missing Secret/ConfigMap (or key); init containers run in order, so the first such one blocks."""
        backoff = 0.0
        while True:
            inits = pod["spec"].get("initContainers") or []
            failing = next(
                ((i, error) for i, ic in enumerate(inits) if (error := self.config_error(pod, ic))), None
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
                    statuses.append(self.config_failed(pod, ic, error))
                else:
                    statuses.append(c.waiting(ic["name"], ic["image"], "PodInitializing"))
            for ct in pod["spec"]["containers"]:
                state.statuses[ct["name"]] = c.waiting(ct["name"], ct["image"], "PodInitializing")
            pod = self.reporter.write(state, pod, "Pending", {"initContainerStatuses": statuses})
            backoff = c.next_backoff(backoff)
            await sleep_unless_deleted(state, backoff)
            pod = self.reporter.current(state)

    def init_completed(self, state: PodState, pod: dict[str, Any]) -> list[dict[str, Any]]:
        """The init containers, run to completion before the others start: their statuses; their logs
        stay readable, as on a real node (kubectl logs -c NAME, --all-containers)."""
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
        for ic in pod["spec"].get("initContainers") or []:
            state.logs[ic["name"]] = [
                f"{state.started_at} INFO init container {ic['name']} started ({ic['image']})",
                f"{state.started_at} INFO init container {ic['name']} completed",
            ]
        return init
