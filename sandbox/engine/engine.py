"""One simulated engine (one pod): the product's performance model (``perfmodel.model.engine``: its
scheduler, prefix cache and KV transfer) with KV links, faults, metrics and a log."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from perfmodel.model import clock
from perfmodel.model.config import PerfConfig
from perfmodel.model.engine import ModelEngine
from perfmodel.model.prefix_cache import PrefixCache
from perfmodel.model.scheduler import Sequence
from sandbox.engine import connector_logs, tent
from sandbox.engine import links as L
from sandbox.engine.config import api_key
from sandbox.engine.faults import FaultSet
from sandbox.engine.metrics import Gauges, render
from sandbox.engine.spec import EngineSpec
from sandbox.engine.startup import startup_lines
from sandbox.engine.vllm_args import connector_family

LOG_LINES = 300
ROLES = ("prefill", "decode")


class SimEngine(ModelEngine):
    def __init__(
        self,
        pod_key: str,
        ip: str,
        port: int,
        spec: EngineSpec,
        labels: dict[str, str],
        cfg: PerfConfig,
        lookup: Callable[[str], SimEngine | None],
        store: PrefixCache | None,
    ) -> None:
        super().__init__(pod_key.rsplit("/", 1)[-1], ip, port, cfg, lookup)
        self._lookup: Callable[[str], SimEngine | None] = lookup
        self.pod_key = pod_key
        self.plane_ports: dict[str, int] = {}  # MindIE: plane -> its own port (management, metrics)
        self.spec = spec
        self.labels = labels
        self.role = spec.role
        self.family = connector_family(spec.kv_connector)
        self.tent = tent.TentCounters()  # Mooncake's transfer engine, served on its own port
        self.tent_port = tent.tent_port(spec.env_dict(), self.family)
        self.store = store  # the Mooncake Store this engine's master serves (shared by its clients)
        self.links = L.LinkTable()
        self.faults = FaultSet()
        self.log_lines: deque[str] = deque(maxlen=LOG_LINES)
        self.started = clock.now()
        self.crashed = False
        self.draining = False
        self.api_key = api_key(spec)
        self.on_role_change: Callable[[str, str], None] | None = None
        # Set once MindIE's management API assigned a peer table (mindie_role): from then on a pull
        # needs a link set up by an assignment; before it (no controller) links form on first use.
        self.peer_table_assigned = False
        self._stats_logged = (clock.now(), 0, 0)

    # --- identity and state -------------------------------------------------------------------
    @property
    def monitored(self) -> bool:
        return self.spec.engine != "mindie" or self.spec.env_dict().get("MIES_SERVICE_MONITOR_MODE") == "1"

    def loaded(self) -> bool:
        return clock.now() - self.started >= self.cfg.startup_seconds * self.cfg.time_scale

    def healthy(self) -> bool:
        return not self.crashed and not self.draining and self.loaded()

    def request_id(self, prefix: str, client_id: str | None) -> str:
        """vLLM's request id: `cmpl-<X-Request-Id or a fresh id>-0` (one prompt per request)."""
        if client_id:
            return f"{prefix}-{client_id[:128]}-0"
        return f"{self.new_request_id(prefix)}-0"

    def log(self, message: str, level: str = "INFO", source: str = "api_server.py") -> None:
        stamp = time.strftime("%m-%d %H:%M:%S", time.gmtime())
        self.log_lines.append(f"{level} {stamp} [{source}] {message}")

    def log_startup(self) -> None:
        for source, level, message in startup_lines(self):
            self.log(message, level, source)

    def maybe_log_stats(self, every: float = 10.0) -> None:
        """vLLM's periodic engine stats line, written at most every `every` seconds while busy."""
        now = clock.now()
        then, prompt, generation = self._stats_logged
        if now - then < every:
            return
        s = self.stats
        elapsed = now - then
        hit_rate = s.prefix_hits / s.prefix_queries * 100 if s.prefix_queries else 0.0
        self.log(
            f"Engine 000: Avg prompt throughput: {(s.prompt_tokens - prompt) / elapsed:.1f} tokens/s, "
            f"Avg generation throughput: {(s.generation_tokens - generation) / elapsed:.1f} tokens/s, "
            f"Running: {self.scheduler.num_running} reqs, Waiting: {self.scheduler.num_waiting} reqs, "
            f"GPU KV cache usage: {self.scheduler.kv_usage * 100:.1f}%, "
            f"Prefix cache hit rate: {hit_rate:.1f}%",
            source="loggers.py",
        )
        self._stats_logged = (now, s.prompt_tokens, s.generation_tokens)

    # --- metrics ------------------------------------------------------------------------------
    def metrics_text(self) -> str:
        self.scheduler.expire_held()
        gauges = Gauges(
            running=self.scheduler.num_running,
            waiting=self.scheduler.num_waiting,
            kv_usage=self.scheduler.kv_usage,
            pulling=self.scheduler.num_pulling,
            block_size=self.cfg.block_size,
            num_gpu_blocks=self.cfg.num_gpu_blocks,
        )
        return render(
            self.spec.engine,
            self.role,
            self.spec.model,
            self.family,
            self.store is not None,
            self.stats,
            gauges,
        )

    # --- the external KV store (Mooncake Store) -----------------------------------------------
    def _after_lookup(self, seq: Sequence) -> None:
        if self.store is None:
            return
        start = seq.cached_tokens // self.cfg.block_size
        self.stats.external_queries += seq.prompt_len - seq.cached_tokens
        found = self.store.match(seq.hashes, start=start)
        tokens = min(found * self.cfg.block_size, max(0, seq.prompt_len - 1 - seq.cached_tokens))
        if tokens <= 0:
            self.stats.observe_store("get", "miss", self.cfg.kv_latency_ms / 1000)
            return
        seconds = self.cfg.transfer_seconds(tokens * self.cfg.kv_bytes_per_token)
        self.stats.external_hits += tokens
        self.stats.observe_store("get", "success", seconds)
        seq.store_hits += tokens
        seq.computed += tokens
        seq.cached_tokens += tokens
        seq.extra_seconds += seconds

    def _after_prefill(self, seq: Sequence) -> None:
        if self.store is not None and seq.hashes:
            self.store.insert(seq.hashes)
            seconds = self.cfg.transfer_seconds(
                len(seq.hashes) * self.cfg.block_size * self.cfg.kv_bytes_per_token
            )
            self.stats.observe_store("put", "success", seconds)

    # --- KV pull over a link (decode side) ----------------------------------------------------
    async def _pull(self, seq: Sequence) -> bool:
        params = seq.remote or {}
        address = f"{params.get('remote_host')}:{params.get('remote_port')}"
        peer = self._lookup(address)
        peer_name = str(params.get("remote_engine_id") or (peer.name if peer else address))
        self.stats.external_queries += seq.prompt_len
        if self.faults.take("kv_not_delivered"):
            return False  # nothing arrives and nothing is counted as failed: the scheduler prefills here
        fault = self.faults.link_fault(peer_name) or (peer.faults.link_fault(self.name) if peer else None)
        link = self.links.get(peer_name)
        if peer is None or peer.crashed:
            return self._pull_failed(
                seq,
                peer,
                peer_name,
                address,
                L.LLM_LINK_FAILED,
                f"link to {peer_name} ({address}) failed: connection refused",
            )
        if fault is not None and fault.kind == "link_down":
            if self.family == "llm-datadist" and self.vllm and link is None:
                # vllm-ascend links before its first pull from a peer; over a dead network that fails
                connector_logs.link_attempt(peer, self)
            elif self.family == "llm-datadist" and self.vllm:
                connector_logs.pull(self, peer)
            await asyncio.sleep(self.cfg.kv_timeout_ms / 1000 * self.cfg.time_scale)
            status = L.LLM_WAIT_PROCESS_TIMEOUT if link is not None else L.LLM_LINK_FAILED
            return self._pull_failed(
                seq,
                peer,
                peer_name,
                address,
                status,
                f"pull_cache from {peer_name} timed out after {self.cfg.kv_timeout_ms:.0f} ms",
            )
        if link is None and self.peer_table_assigned:
            # MindIE after a role assignment links only the peers it was given: no link, no transfer.
            return self._pull_failed(
                seq,
                peer,
                peer_name,
                address,
                L.LLM_NOT_YET_LINK,
                f"no link to {peer_name}: it is not among this instance's assigned peers",
            )
        if link is None or not link.usable:
            link = self._open_link(peer_name, peer)
            if self.family == "llm-datadist" and self.vllm:
                connector_logs.link_built(peer, self)
        if self.family == "llm-datadist" and self.vllm:
            connector_logs.pull(self, peer)
        if peer.faults.take("kv_expire"):
            peer.scheduler.expire_now(str(params.get("request_id") or ""))
        held = peer.scheduler.release_held(str(params.get("request_id") or ""))
        if held is None:
            self.stats.failed_recvs += 1
            link.record_failure(
                L.LLM_KV_CACHE_NOT_EXIST, f"no KV cache for request {params.get('request_id')}"
            )
            seq.error = (
                f"LLM_KV_CACHE_NOT_EXIST: {peer_name} holds no KV for request {params.get('request_id')}"
            )
            self.log(seq.error, "WARNING", "kv_connector")
            return False
        num_bytes = held.prompt_len * self.cfg.kv_bytes_per_token
        slow = fault if fault is not None and fault.kind == "link_slow" else None
        factor = slow.factor if slow else 1.0
        if peer.family == "mooncake":  # Mooncake's prefill writes the KV through its transfer engine
            transport = "rdma"
            if peer.faults.take("kv_transport_fallback"):
                transport, factor = "tcp", factor * tent.TCP_SLOWDOWN
                peer.tent.fail_over("rdma", "tcp")
            peer.tent.write(transport, num_bytes)
        # One link moves one KV cache at a time: concurrent pulls queue behind each other.
        elapsed = await self.receive(seq, link, num_bytes, factor, slow.delay_ms if slow else 0.0)
        link.record_success(elapsed, num_bytes)
        serve = peer.links.get(self.name)
        if serve is not None:
            serve.record_success(elapsed, num_bytes)
        return True

    def _pull_failed(
        self, seq: Sequence, peer: SimEngine | None, peer_name: str, address: str, status: str, error: str
    ) -> bool:
        linked = self.links.get(peer_name) is not None
        link = self.links.get(peer_name) or self.links.open(peer_name, address, "pull", status)
        link.record_failure(status, error)
        if peer is not None:
            serve = peer.links.get(self.name)
            if serve is not None:
                serve.record_failure(status, error)
        self.stats.failed_transfers += 1
        seq.error = f"{status}: {error}"
        connector_logs.transfer_failure(self, seq.request_id, peer, error, linked=linked)
        return False

    @property
    def vllm(self) -> bool:
        return self.spec.engine in ("vllm", "vllm-ascend")

    def _open_link(self, peer_name: str, peer: SimEngine) -> L.Link:
        link = self.links.open(peer_name, peer.address, "pull")
        peer.links.open(self.name, self.address, "serve")
        return link

    # --- the admin API ------------------------------------------------------------------------
    def link_table(self) -> dict[str, Any]:
        rows = []
        for link in self.links.open_links():
            observed = None
            if self.faults.link_fault(link.peer, consume=False) is not None and link.status == L.LLM_SUCCESS:
                fault = self.faults.link_fault(link.peer, consume=False)
                if fault is not None and fault.kind == "link_down":
                    observed = L.LLM_WAIT_PROCESS_TIMEOUT
            peer = self._lookup(link.peer_address)
            if observed is None and peer is not None and link.status == L.LLM_SUCCESS:
                fault = peer.faults.link_fault(self.name, consume=False)
                if fault is not None and fault.kind == "link_down":
                    observed = L.LLM_WAIT_PROCESS_TIMEOUT
            if observed is None and link.status == L.LLM_SUCCESS and (peer is None or peer.crashed):
                observed = L.LLM_LINK_FAILED
            rows.append(link.as_dict(observed))
        return {
            "pod": self.name,
            "address": self.address,
            "engine": self.spec.engine,
            "role": self.role,
            "kv_connector": self.spec.kv_connector,
            "cluster_id": L.cluster_id(self.name),
            "links": rows,
        }

    async def link_to(self, targets: list[str], timeout_ms: float) -> tuple[str, list[dict[str, str]]]:
        """Open links to prefill peers (by pod name or ip:port); (ret, per-peer codes) like link_clusters."""
        if self.role == "prefill":
            return L.LLM_FEATURE_NOT_ENABLED, [
                {
                    "peer": t,
                    "status": L.LLM_FEATURE_NOT_ENABLED,
                    "message": "only the decode side opens links; this is a prefill (PROMPT) instance",
                }
                for t in targets
            ]
        results: list[dict[str, str]] = []
        for target in targets:
            peer = self._lookup(target)
            name = peer.name if peer else target
            existing = self.links.get(name)
            if peer is None or peer.crashed:
                results.append(
                    {"peer": name, "status": L.LLM_LINK_FAILED, "message": f"{target} is not reachable"}
                )
                continue
            if not peer.loaded():
                await asyncio.sleep(min(timeout_ms, self.cfg.kv_timeout_ms) / 1000 * self.cfg.time_scale)
                results.append(
                    {
                        "peer": name,
                        "status": L.LLM_WAIT_PROCESS_TIMEOUT,
                        "message": f"{name} is not initialised yet (still loading); link again once Ready",
                    }
                )
                continue
            if peer.role == "decode":
                results.append(
                    {
                        "peer": name,
                        "status": L.LLM_LINK_FAILED,
                        "message": f"{name} is a decode instance; link to prefill instances",
                    }
                )
                continue
            fault = self.faults.link_fault(name, consume=False) or peer.faults.link_fault(
                self.name, consume=False
            )
            if fault is not None and fault.kind == "link_down":
                await asyncio.sleep(min(timeout_ms, self.cfg.kv_timeout_ms) / 1000 * self.cfg.time_scale)
                link = existing or self.links.open(name, peer.address, "pull", L.LLM_LINK_FAILED)
                link.record_failure(L.LLM_LINK_FAILED, f"link_clusters to {name} timed out")
                results.append(
                    {"peer": name, "status": L.LLM_LINK_FAILED, "message": "link set-up timed out"}
                )
                continue
            if existing is not None and existing.usable:
                results.append({"peer": name, "status": L.LLM_EXIST_LINK, "message": "already linked"})
                continue
            self._open_link(name, peer)
            if self.family == "llm-datadist" and self.vllm:
                connector_logs.link_built(peer, self)
            results.append({"peer": name, "status": L.LLM_SUCCESS, "message": "linked"})
        ok = all(r["status"] in (L.LLM_SUCCESS, L.LLM_EXIST_LINK) for r in results)
        return (L.LLM_SUCCESS if ok else L.LLM_LINK_FAILED), results

    def unlink(self, target: str) -> bool:
        peer = self._lookup(target)
        name = peer.name if peer else target
        link = self.links.close(name)
        if link is None:
            for candidate in self.links.open_links():
                if candidate.peer_address == target:
                    link = self.links.close(candidate.peer)
                    name = candidate.peer
                    break
        if link is None:
            return False
        other = peer or self._lookup(link.peer_address)
        if other is not None:
            other.links.close(self.name)
        self.log(f"unlink_clusters: unlinked {name}", source="llm_datadist")
        return True

    def switch_role(self, role: str) -> tuple[int, dict[str, Any]]:
        if role == self.role:
            return 200, {"ret": L.LLM_SUCCESS, "role": role, "previous_role": role}
        if self.role == "both":
            return 409, {
                "ret": L.LLM_FEATURE_NOT_ENABLED,
                "message": "a mixed (prefill+decode) instance has no role to switch",
            }
        if len(self.links):
            peers = sorted(link.peer for link in self.links.open_links())
            return 409, {
                "ret": L.LLM_EXIST_LINK,
                "links": peers,
                "message": f"unlink {', '.join(peers)} first (DELETE /sandbox/kv/links/<peer>)",
            }
        previous = self.role
        self.role = role
        if self.on_role_change is not None:
            self.on_role_change(self.pod_key, role)
        self.scheduler.drop_all_held()
        self.log(f"switch_role: {previous} -> {role}", source="llm_datadist")
        return 200, {"ret": L.LLM_SUCCESS, "role": role, "previous_role": previous}

    def crash(self) -> None:
        self.crashed = True
        self.log("EngineCore encountered a fatal error.", "ERROR", "core.py")
        self.log(
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
            "ERROR",
            "async_llm.py",
        )
