"""What the kubelet keeps per pod and how it reports back: `PodState` (addresses, container statuses,
restart counts, logs), `PodReporter` (reads the stored pod, writes its status, records its events) and
the wait that a deletion cuts short."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from sandbox.apiserver.objects import Api
from sandbox.controllers import containers as c
from sandbox.controllers.base import EventRecorder, IpPool


class Terminating(Exception):
    """The pod was deleted while its worker waited: stop its containers and remove it."""


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


async def sleep_unless_deleted(state: PodState, seconds: float) -> None:
    """Wait `seconds`, or less when the pod is deleted meanwhile (then raise `Terminating`)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(state.terminate.wait(), timeout=seconds)
    if state.terminate.is_set():
        raise Terminating


class PodReporter:
    """The kubelet's side of the API for one node's pods: the stored pod, its status, its events."""

    def __init__(self, api: Api, events: EventRecorder, ips: IpPool, manager: str) -> None:
        self.api = api
        self.events = events
        self.ips = ips
        self.manager = manager

    def host_ip(self, state: PodState) -> str:
        return f"127.{self.ips.net}.0.{state.node.rsplit('-', 1)[-1]}"

    def current(self, state: PodState) -> dict[str, Any]:
        """The stored pod, not copied: read it, never mutate it."""
        pod = self.api.store.peek("", "pods", state.namespace, state.name)
        if pod is None or pod["metadata"]["uid"] != state.uid:
            raise asyncio.CancelledError
        return pod

    def write(
        self, state: PodState, pod: dict[str, Any], phase: str, extra: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        status = c.pod_status(pod, state.statuses, phase, self.host_ip(state), state.ip, state.started_at)
        status.update(extra or {})
        return self.api.write_status(self.api.registry.by_key("", "pods"), pod, status, self.manager)

    def event(
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

    def container_started(self, pod: dict[str, Any], container: dict[str, Any]) -> None:
        """The events of a container whose image is there (pulled when its policy says Always) and
        which was created and started."""
        name, image = container["name"], container["image"]
        if container.get("imagePullPolicy") == "Always":
            self.event(pod, "Pulling", f'Pulling image "{image}"', name)
            self.event(
                pod,
                "Pulled",
                f'Successfully pulled image "{image}" in 412ms (412ms including waiting). '
                "Image size: 1073741824 bytes.",
                name,
            )
        else:
            self.event(pod, "Pulled", f'Container image "{image}" already present on machine', name)
        self.event(pod, "Created", f"Created container: {name}", name)
        self.event(pod, "Started", f"Started container {name}", name)
