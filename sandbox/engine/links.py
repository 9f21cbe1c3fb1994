"""P/D KV links with LLM-DataDist semantics: the decode side opens links to prefill instances.

One `Link` per peer on each side (direction `pull` on the decode side, `serve` on the prefill side).
Status codes are LLM-DataDist's. A link whose transfers time out (a `link_down` fault) shows
`LLM_WAIT_PROCESS_TIMEOUT` — the link is dead and must be re-established (a `POST /sandbox/kv/links` to it
again, or the next transfer's handshake once the fault is gone).

This table is the sandbox's own control interface (`/sandbox/kv/links`): real engines serve none, and
Tandem never reads it; what Tandem sees of a link is what a real engine shows (connector metrics,
connector log lines, and the answers to Tandem's own probe requests through the pair).

`GET /sandbox/kv/links` answers `table()`:
{"pod": str, "address": "ip:port", "engine": str, "role": "prefill|decode|both", "kv_connector": str|null,
 "cluster_id": int, "links": [{"peer": pod name, "peer_address": "ip:port", "peer_cluster_id": int,
 "direction": "pull|serve", "status": LLM_* code, "state": "linked|broken|failed", "linked_at": unix s,
 "transfers": int, "failures": int, "bytes": int, "xfer_seconds_sum": float, "xfer_seconds_max": float,
 "last_transfer_at": unix s|null, "last_failure_at": unix s|null, "last_error": str|null}]}
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass
from typing import Any

LLM_SUCCESS = "LLM_SUCCESS"
LLM_LINK_FAILED = "LLM_LINK_FAILED"
LLM_NOT_YET_LINK = "LLM_NOT_YET_LINK"
LLM_WAIT_PROCESS_TIMEOUT = "LLM_WAIT_PROCESS_TIMEOUT"
LLM_KV_CACHE_NOT_EXIST = "LLM_KV_CACHE_NOT_EXIST"
LLM_EXIST_LINK = "LLM_EXIST_LINK"
LLM_FEATURE_NOT_ENABLED = "LLM_FEATURE_NOT_ENABLED"

_STATE = {
    LLM_SUCCESS: "linked",
    LLM_WAIT_PROCESS_TIMEOUT: "broken",
    LLM_LINK_FAILED: "failed",
    LLM_KV_CACHE_NOT_EXIST: "linked",
}


def cluster_id(pod_name: str) -> int:
    """A stable LLM-DataDist cluster id for a pod."""
    return zlib.crc32(pod_name.encode()) & 0x7FFFFFFF


@dataclass
class Link:
    peer: str
    peer_address: str
    direction: str  # "pull" (decode side) | "serve" (prefill side)
    status: str = LLM_SUCCESS
    linked_at: float = 0.0
    transfers: int = 0
    failures: int = 0
    bytes: int = 0
    xfer_seconds_sum: float = 0.0
    xfer_seconds_max: float = 0.0
    last_transfer_at: float | None = None
    last_failure_at: float | None = None
    last_error: str | None = None
    busy_until: float = 0.0  # monotonic time the link finishes its queued transfers

    @property
    def usable(self) -> bool:
        return self.status in (LLM_SUCCESS, LLM_KV_CACHE_NOT_EXIST)

    def record_success(self, seconds: float, num_bytes: int) -> None:
        self.transfers += 1
        self.bytes += num_bytes
        self.xfer_seconds_sum += seconds
        self.xfer_seconds_max = max(self.xfer_seconds_max, seconds)
        self.last_transfer_at = time.time()
        self.status = LLM_SUCCESS
        self.last_error = None

    def record_failure(self, status: str, error: str) -> None:
        self.failures += 1
        self.last_failure_at = time.time()
        self.status = status
        self.last_error = error

    def as_dict(self, observed_status: str | None = None) -> dict[str, Any]:
        status = observed_status or self.status
        return {
            "peer": self.peer,
            "peer_address": self.peer_address,
            "peer_cluster_id": cluster_id(self.peer),
            "direction": self.direction,
            "status": status,
            "state": _STATE.get(status, "failed"),
            "linked_at": self.linked_at,
            "transfers": self.transfers,
            "failures": self.failures,
            "bytes": self.bytes,
            "xfer_seconds_sum": round(self.xfer_seconds_sum, 6),
            "xfer_seconds_max": round(self.xfer_seconds_max, 6),
            "last_transfer_at": self.last_transfer_at,
            "last_failure_at": self.last_failure_at,
            "last_error": self.last_error,
        }


class LinkTable:
    __slots__ = ("links",)

    def __init__(self) -> None:
        self.links: dict[str, Link] = {}

    def __len__(self) -> int:
        return len(self.links)

    def get(self, peer: str) -> Link | None:
        return self.links.get(peer)

    def open(self, peer: str, address: str, direction: str, status: str = LLM_SUCCESS) -> Link:
        link = self.links.get(peer)
        if link is None:
            link = Link(
                peer=peer, peer_address=address, direction=direction, status=status, linked_at=time.time()
            )
            self.links[peer] = link
        else:
            link.peer_address = address
            link.status = status
            link.linked_at = time.time()
        return link

    def close(self, peer: str) -> Link | None:
        return self.links.pop(peer, None)

    def open_links(self) -> list[Link]:
        return list(self.links.values())
