"""The kubelet's readiness probe of a running engine (its `readinessProbe.httpGet` path, `/health` by
default): Ready once it answers 2xx/3xx, `Unhealthy` events (at most one per 10 s) while it does not,
and how often to probe."""

from __future__ import annotations

import time
from typing import Any

import aiohttp

from sandbox.controllers.pod_state import PodReporter, PodState
from sandbox.engine.farm import EngineFarm

PROBE_INTERVAL = 0.5  # until Ready
READY_PROBE_INTERVAL = 5.0  # once Ready, unless the probe's periodSeconds is shorter (upstream default 10 s)
UNHEALTHY_EVENT_SECONDS = 10.0


def probe_period(pod: dict[str, Any], engine_name: str | None) -> float:
    """Seconds between two probes of a Ready pod."""
    containers: list[dict[str, Any]] = pod["spec"]["containers"]
    container = next((ct for ct in containers if ct["name"] == engine_name), {})
    period = (container.get("readinessProbe") or {}).get("periodSeconds")
    return min(READY_PROBE_INTERVAL, max(1.0, float(period))) if period else READY_PROBE_INTERVAL


class ReadinessProber:
    def __init__(self, reporter: PodReporter, farm: EngineFarm) -> None:
        self.reporter = reporter
        self.farm = farm
        self._session: aiohttp.ClientSession | None = None

    async def probe(self, state: PodState, pod: dict[str, Any], name: str) -> None:
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
            self.reporter.event(pod, "Unhealthy", f"Readiness probe failed: {detail}", name, warning=True)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
