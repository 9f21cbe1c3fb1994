"""Faults an operator (or a test) injects into one engine through `POST /sandbox/faults`.

Body: {"kind": KIND, ...options}. Kinds and options:
- `link_down` {peer?}: KV transfers over the link to `peer` (every link without `peer`) time out;
  both pods stay Ready. The link shows LLM_WAIT_PROCESS_TIMEOUT.
- `link_slow` {peer?, factor=10, delay_ms=0}: transfers take `factor` × longer plus `delay_ms`.
- `http_5xx` {status=503}: inference endpoints answer that status with an error body.
- `http_401`: inference endpoints answer 401 Unauthorized.
- `http_429`: inference endpoints answer 429 rate-limited (with `Retry-After`).
- `non_json`: inference endpoints answer 200 with an HTML body (a proxy error page).
- `slow` {delay_ms=1000, target="inference"|"metrics"|"all"}: responses are delayed.
- `crash`: the engine dies (its port closes); the kubelet sees it and restarts the pod.
- `kv_not_delivered` (on a decode): its KV connector silently delivers nothing: the decode prefills the
  whole prompt itself (`vllm:prompt_tokens_by_source{source="local_compute"}` rises, `external_kv_transfer`
  stays flat), no failure is counted and the request succeeds; the prefill's KV waits and expires.
- `kv_expire` (on a prefill): the KV it holds for decode expires before the decode pulls it
  (`vllm:nixl_num_kv_expired_reqs` rises here); the decode finds none and prefills again.
- `kv_transport_fallback` (on a Mooncake prefill, the side whose transfer engine writes the KV): its
  transfers fall back from rdma to tcp (`tent_transport_failover_total{from="rdma",to="tcp"}` on its TENT
  port, bytes counted under `transport="tcp"`); they succeed, 4x slower.
Every kind takes `count` (apply to the next N requests only, then expire) and `probability` (0..1).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

KINDS = (
    "link_down",
    "link_slow",
    "http_5xx",
    "http_401",
    "http_429",
    "non_json",
    "slow",
    "crash",
    "kv_not_delivered",
    "kv_expire",
    "kv_transport_fallback",
)
HTTP_KINDS = ("http_5xx", "http_401", "http_429", "non_json")
TARGETS = ("inference", "metrics", "all")


class FaultError(ValueError):
    """A fault request is invalid; `field` names the field, str() says what is wrong and the fix."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass
class Fault:
    kind: str
    peer: str | None = None
    status: int = 503
    delay_ms: float = 0.0
    factor: float = 10.0
    target: str = "inference"
    probability: float = 1.0
    count: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "peer": self.peer,
            "status": self.status,
            "delay_ms": self.delay_ms,
            "factor": self.factor,
            "target": self.target,
            "probability": self.probability,
            "count": self.count,
        }


def parse_fault(body: Any) -> Fault:
    if not isinstance(body, dict):
        raise FaultError("kind", 'send a JSON object such as {"kind": "link_down", "peer": "prefill-0"}')
    kind = body.get("kind")
    if kind not in KINDS:
        raise FaultError("kind", f"unknown fault kind {kind!r}; use one of {', '.join(KINDS)}")
    fault = Fault(kind=str(kind))
    peer = body.get("peer")
    if peer is not None:
        if not isinstance(peer, str) or not peer:
            raise FaultError("peer", 'peer must be the peer pod\'s name, e.g. "prefill-0"')
        fault.peer = peer
    fault.status = int(_number(body, "status", 503 if kind == "http_5xx" else 401))
    if kind == "http_5xx" and not 500 <= fault.status <= 599:
        raise FaultError("status", f"status {fault.status} is not a 5xx code; use 500-599")
    fault.delay_ms = _number(body, "delay_ms", 1000.0 if kind == "slow" else 0.0)
    fault.factor = _number(body, "factor", 10.0)
    if fault.factor < 1:
        raise FaultError("factor", "factor slows a link down: use a number >= 1")
    target = body.get("target", "inference")
    if target not in TARGETS:
        raise FaultError("target", f"target must be one of {', '.join(TARGETS)}")
    fault.target = str(target)
    fault.probability = _number(body, "probability", 1.0)
    if not 0 <= fault.probability <= 1:
        raise FaultError("probability", "probability must be between 0 and 1")
    count = body.get("count")
    if count is not None:
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise FaultError("count", "count must be a positive integer (the number of requests to affect)")
        fault.count = count
    return fault


def _number(body: dict[str, Any], name: str, default: float) -> float:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FaultError(name, f"{name} must be a number")
    if value < 0:
        raise FaultError(name, f"{name} must not be negative")
    return float(value)


class FaultSet:
    __slots__ = ("faults",)

    def __init__(self) -> None:
        self.faults: list[Fault] = []

    def __bool__(self) -> bool:
        return bool(self.faults)

    def add(self, fault: Fault) -> None:
        self.faults.append(fault)

    def clear(self, kind: str | None = None, peer: str | None = None) -> int:
        keep = [f for f in self.faults if (kind and f.kind != kind) or (peer and f.peer != peer)]
        removed = len(self.faults) - len(keep)
        self.faults = keep
        return removed

    def _take(self, fault: Fault) -> bool:
        if fault.probability < 1 and random.random() >= fault.probability:
            return False
        if fault.count is not None:
            fault.count -= 1
            if fault.count <= 0:
                self.faults.remove(fault)
        return True

    def http_fault(self) -> Fault | None:
        for fault in list(self.faults):
            if fault.kind in HTTP_KINDS and self._take(fault):
                return fault
        return None

    def delay_seconds(self, target: str) -> float:
        for fault in list(self.faults):
            if fault.kind == "slow" and fault.target in (target, "all") and self._take(fault):
                return fault.delay_ms / 1000
        return 0.0

    def link_fault(self, peer: str, consume: bool = True) -> Fault | None:
        for fault in list(self.faults):
            matches = fault.kind in ("link_down", "link_slow") and fault.peer in (None, peer)
            if matches and (not consume or self._take(fault)):
                return fault
        return None

    def take(self, kind: str) -> bool:
        """Whether a fault of ``kind`` applies to this request (consuming its count)."""
        return any(f.kind == kind and self._take(f) for f in list(self.faults))

    def has(self, kind: str) -> bool:
        return any(f.kind == kind for f in self.faults)
