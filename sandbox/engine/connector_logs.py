"""The KV connectors' own log lines, as the real connectors write them (read by Tandem through
``pods/log``; docs/kv-links.md and docs/ascend.md give the sources). Engines whose connector lines are not
known (MindIE, LMCache, ...) log none: none are invented.

vllm-ascend's LLM-DataDist connector (vllm-project/vllm-ascend 848419d1ba89,
``vllm_ascend/distributed/llmdatadist_c_mgr_connector.py``, the last commit before its removal) names its
links by the NPUs' device IPs, ``pd_comm_<prefill device ip>_<decode device ip>``, one link per TP rank;
an engine without NPUs stands in with its pod IP.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

from sandbox.engine import links as L

if TYPE_CHECKING:
    from sandbox.engine.engine import SimEngine

C_MGR = "llmdatadist_c_mgr_connector.py:969"  # "remote cluster id is: ..." and the pull
C_MGR_TRY = "llmdatadist_c_mgr_connector.py:784"
C_MGR_LINKED = "llmdatadist_c_mgr_connector.py:807"
C_MGR_FAILED = "llmdatadist_c_mgr_connector.py:679"  # start_load_kv's handle_exception
SGLANG_KV_PORT = 17000  # the decode side's KV receive port SGLang's logs name


def rank_pairs(prefill: SimEngine, decode: SimEngine) -> list[tuple[str, str]]:
    """(prefill device IP, decode device IP) per TP rank (the pod IPs for an engine without NPUs)."""
    p_ips = list(prefill.spec.device_ips) or [prefill.ip]
    d_ips = list(decode.spec.device_ips) or [decode.ip]
    return list(zip(p_ips, d_ips, strict=False)) or [(prefill.ip, decode.ip)]


def link_attempt(prefill: SimEngine, decode: SimEngine) -> None:
    """``add_remote_agent`` starting a link (the decode, before its first pull from ``prefill``)."""
    for prefill_ip, decode_ip in rank_pairs(prefill, decode):
        name = f"pd_comm_{prefill_ip}_{decode_ip}"
        decode.log(f"LLMDataDistCMgrConnectorWorker: try link with remote, comm id: {name}", source=C_MGR_TRY)


def link_built(prefill: SimEngine, decode: SimEngine) -> None:
    """A link set up: the attempt, then the success line naming the prefill's cluster id."""
    cid = L.cluster_id(prefill.name)
    for prefill_ip, decode_ip in rank_pairs(prefill, decode):
        name = f"pd_comm_{prefill_ip}_{decode_ip}"
        decode.log(f"LLMDataDistCMgrConnectorWorker: try link with remote, comm id: {name}", source=C_MGR_TRY)
        decode.log(
            f"Successfully build link with cluster id {cid} with cluster name {name} !", source=C_MGR_LINKED
        )


def pull(decode: SimEngine, prefill: SimEngine) -> None:
    decode.log(f"remote cluster id is: {L.cluster_id(prefill.name)}", source=C_MGR)
    decode.log("Try pull blocks from remote server", source=C_MGR)


def transfer_failure(
    engine: SimEngine, request_id: str, peer: SimEngine | None, error: str, *, linked: bool = True
) -> None:
    """The real connectors' failure lines: NIXL and LLM-DataDist on the pulling (decode) side, Mooncake
    on the sending (prefill) side; only NIXL and Mooncake name the request. SGLang's prefill names the
    decode pod's address. ``linked``: an LLM-DataDist link to ``peer`` existed (else linking failed)."""
    if engine.spec.engine == "sglang" and peer is not None and not peer.crashed:
        room = zlib.crc32(request_id.encode()) & 0xFFFFFFFF  # SGLang names a transfer by its bootstrap room
        peer.log(f"Failed to send kv chunk of {room} to {engine.ip}:{SGLANG_KV_PORT}", "ERROR", "conn.py:312")
        return
    if not engine.vllm:
        return
    if engine.family == "nixl":
        engine.log(
            f"NIXL transfer failed for request {request_id} with state ERR. Marking blocks as invalid.",
            "ERROR",
            "nixl_connector.py:1497",
        )
    elif engine.family == "mooncake":
        sender = peer if peer is not None and not peer.crashed else engine
        sender.log(
            f"Failed to transfer KV cache for request {request_id}: {error}",
            "ERROR",
            "mooncake_connector.py:412",
        )
    elif engine.family == "llm-datadist" and peer is not None and not linked:
        comm_id = L.cluster_id(f"{peer.name}>{engine.name}")  # LLM-DataDist's comm id: an integer
        engine.log(
            f"KV transfer task failed: LLMDataDistCMgrConnectorWorker: Linking failed, comm id: {comm_id}",
            "ERROR",
            C_MGR_FAILED,
        )
    elif engine.family == "llm-datadist":
        engine.log(
            "KV transfer task failed: LLMDataDistCMgrConnectorWorker: Timeout during pull_blocks, you can "
            "try to increase the sync_kv_timeout config or checking your connect status",
            "ERROR",
            C_MGR_FAILED,
        )
