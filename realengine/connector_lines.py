"""Have vLLM's own connector code write its KV-transfer failure lines (run with the engine's Python).

No NIXL or Mooncake transfer can fail on the machines Tandem is tested on (neither transfer engine runs
on their CPUs), so the lines Tandem's log scan must match are produced by calling the connectors' own
failure paths, unchanged, on workers built without a transfer engine: NIXL's
``NixlBaseConnectorWorker._log_failure`` (what every NIXL failure goes through) and Mooncake's
``MooncakeConnectorWorker._handle_failed_recv`` (a failed pull on the decode side). vLLM's logger writes
them in its own format; the caller keeps its stderr as test data.

    python -m realengine.connector_lines 2> lines.log
"""

from __future__ import annotations

import os
import queue
import sys

KEPT: list[object] = []  # half-built workers are never collected: their __del__ would shut down nothing


def nixl_lines() -> None:
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl.base_worker import NixlBaseConnectorWorker
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl.metadata import RemoteMeta, ReqMeta

    worker = object.__new__(NixlBaseConnectorWorker)
    worker.engine_id = "decode-engine-7f3a"
    worker._recving_metadata = {}
    remote = RemoteMeta(
        block_ids=[[11, 12, 13]], host="10.8.0.21", port=5600, engine_id="prefill-engine-91c2",
        request_id="chatcmpl-tandem-probe-4c1d9e-0",
    )  # fmt: skip
    meta = ReqMeta(
        local_block_ids=[[3, 4, 5]], local_physical_block_ids=[[3, 4, 5]], tp_size=1, remote=remote
    )
    worker._log_failure(failure_type="transfer_failed", req_id="chatcmpl-tandem-probe-4c1d9e-0", meta=meta)
    worker._log_failure(
        failure_type="handshake_failed", req_id=None, msg="remote agent unreachable",
        remote_engine_id="prefill-engine-91c2",
    )  # fmt: skip
    other = RemoteMeta(
        block_ids=[[21]],
        host="10.8.0.22",
        port=5600,
        engine_id="prefill-engine-55d0",
        request_id="cmpl-client-1",
    )
    worker._log_failure(
        failure_type="notification_failed", req_id="cmpl-client-1",
        meta=ReqMeta(local_block_ids=[[9]], local_physical_block_ids=[[9]], tp_size=1, remote=other),
        msg="P worker blocks will be freed after timeout. This may indicate network issues.",
    )  # fmt: skip


def mooncake_lines() -> None:
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake import mooncake_connector as mc

    worker = object.__new__(mc.MooncakeConnectorWorker)
    worker.xfer_stats = mc.MooncakeKVConnectorStats()
    worker._is_hma_required = False
    worker._invalid_block_ids = queue.Queue()
    worker._failed_recv_reqs = queue.Queue()
    worker.finished_recving_reqs = set()
    metas = {
        rid: mc.PullReqMeta(
            d_req_id=rid,
            transfer_id=f"xfer-{n}",
            local_block_ids=[[n + 1]],
            remote_engine_id="prefill-engine-91c2",
            remote_bootstrap_addr="10.8.0.21:8998",
        )
        for n, rid in enumerate(["chatcmpl-tandem-probe-77ab01-0", "cmpl-client-2"])
    }
    worker._handle_failed_recv(metas, list(metas), "transfer failed: connection reset by peer")
    KEPT.append(worker)


def main() -> int:
    from vllm.logger import _configure_vllm_root_logger

    _configure_vllm_root_logger()  # the server's own log format, as it sets it from the environment
    nixl_lines()
    mooncake_lines()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the half-built Mooncake worker's __del__ would shut down a transfer engine it never had


if __name__ == "__main__":
    main()
