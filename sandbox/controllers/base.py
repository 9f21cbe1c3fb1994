"""Controller plumbing: level-triggered reconcile loops woken by storage events, events, IPs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from abc import ABC, abstractmethod
from datetime import UTC, datetime
from typing import Any

from sandbox.apiserver.errors import ApiError
from sandbox.apiserver.objects import Api
from sandbox.apiserver.resources import ResourceType
from sandbox.apiserver.storage import WatchEvent

log = logging.getLogger("sandbox.controllers")


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Reconciler(ABC):
    """Re-runs `reconcile()` (the whole kind, level-triggered) after any change it watches."""

    name = "controller"
    watches: tuple[tuple[str, str], ...] = ()
    resync_seconds = 5.0

    def __init__(self, api: Api) -> None:
        self.api = api
        self.dirty = asyncio.Event()
        self.dirty.set()

    def rt(self, group: str, plural: str) -> ResourceType:
        return self.api.registry.by_key(group, plural)

    def notify(self, event: WatchEvent) -> None:
        if (event.group, event.plural) in self.watches:
            self.dirty.set()

    @abstractmethod
    async def reconcile(self) -> None:
        """Bring everything this controller owns in line with the stored objects."""

    async def run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.dirty.wait(), timeout=self.resync_seconds)
            self.dirty.clear()
            try:
                await self.reconcile()
            except ApiError as exc:
                log.debug("%s: %s", self.name, exc.message)
                self.dirty.set()
            except Exception:
                log.exception("%s reconcile failed", self.name)
            await asyncio.sleep(0.02)  # let a burst of writes coalesce into one pass


_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")
_SUFFIXES = {
    "": 1.0,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
}


def parse_quantity(value: Any) -> float:
    match = _QUANTITY.match(str(value).strip())
    if not match or match.group(2) not in _SUFFIXES:
        raise ValueError(
            "quantities must match the regular expression "
            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {value}"
        )
    return float(match.group(1)) * _SUFFIXES[match.group(2)]


def pod_requests(pod: dict[str, Any]) -> dict[str, float]:
    """Summed container requests (a limit implies the request when none is given)."""
    total: dict[str, float] = {}
    for container in pod.get("spec", {}).get("containers") or []:
        resources = container.get("resources") or {}
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, quantity in merged.items():
            try:
                total[name] = total.get(name, 0.0) + parse_quantity(quantity)
            except ValueError:
                continue
    return total


def owner_reference(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def owned_by(obj: dict[str, Any], owner_uid: str) -> bool:
    return any(ref.get("uid") == owner_uid for ref in obj["metadata"].get("ownerReferences") or [])


def is_pod_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class EventRecorder:
    """core/v1 Events, aggregated like the real recorder (same object+reason+message → count++)."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self._seen: dict[tuple[str, str, str], str] = {}
        self._counter = 0

    def record(
        self,
        obj: dict[str, Any],
        reason: str,
        message: str,
        *,
        type: str = "Normal",
        component: str = "kubelet",
        host: str | None = None,
        field_path: str | None = None,
    ) -> None:
        rt = self.api.registry.by_key("", "events")
        meta = obj["metadata"]
        namespace = meta.get("namespace") or "default"
        key = (meta.get("uid", ""), reason, message)
        now = now_iso()
        existing_name = self._seen.get(key)
        if existing_name is not None:
            existing = self.api.find(rt, namespace, existing_name)
            if existing is not None:
                existing["count"] = int(existing.get("count", 1)) + 1
                existing["lastTimestamp"] = now
                self.api.write(rt, existing, component)
                return
        self._counter += 1
        name = f"{meta['name']}.{int(datetime.now(UTC).timestamp() * 1e9):x}{self._counter:x}"
        involved = {
            "kind": obj.get("kind"),
            "namespace": meta.get("namespace", ""),
            "name": meta["name"],
            "uid": meta.get("uid", ""),
            "apiVersion": obj.get("apiVersion"),
            "resourceVersion": meta.get("resourceVersion", ""),
        }
        if field_path:
            involved["fieldPath"] = field_path
        source: dict[str, str] = {"component": component}
        if host:
            source["host"] = host
        event = {
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "source": source,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "type": type,
            "eventTime": None,
            "reportingComponent": component,
            "reportingInstance": host or "",
        }
        try:
            self.api.create(rt, namespace, event, manager=component)
        except ApiError as exc:
            log.debug("event not recorded: %s", exc.message)
            return
        self._seen[key] = name


class IpPool:
    """Loopback addresses in this sandbox's 127.<net>.0.0/16: pods, routers, service IPs and the
    external (load-balancer) addresses."""

    RANGES = {"pod": (1, 199), "router": (200, 219), "service": (220, 249), "external": (250, 254)}

    def __init__(self, net: int) -> None:
        self.net = net
        self._used: set[str] = set()
        self._cursor = {kind: (lo, 1) for kind, (lo, _) in self.RANGES.items()}

    def allocate(self, kind: str) -> str:
        lo, hi = self.RANGES[kind]
        third, fourth = self._cursor[kind]
        for _ in range((hi - lo + 1) * 254):
            fourth += 1
            if fourth > 254:
                fourth = 1
                third = lo if third >= hi else third + 1
            ip = f"127.{self.net}.{third}.{fourth}"
            if ip not in self._used:
                self._used.add(ip)
                self._cursor[kind] = (third, fourth)
                return ip
        raise RuntimeError(f"no free {kind} address left in 127.{self.net}.0.0/16")

    def reserve(self, ip: str) -> None:
        self._used.add(ip)

    def release(self, ip: str | None) -> None:
        if ip:
            self._used.discard(ip)
