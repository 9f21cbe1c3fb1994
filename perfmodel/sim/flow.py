"""One request through a simulated cluster, the way the router sends it: a prefill instance (prefix
affinity, else least loaded; ``perfmodel.model.routing.choose``) computes the prompt and holds its KV, then
a decode instance pulls the KV over its link and generates. A failed prefill (nothing streamed yet) is
retried on other instances, like the router does. Only the HTTP hop is left out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfmodel.model import clock
from perfmodel.model.routing import AFFINITY_BLOCKS, choose
from perfmodel.model.scheduler import Sequence
from perfmodel.sim.types import GROUP, Outcome, SimRequest

if TYPE_CHECKING:
    from perfmodel.sim.cluster import SimCluster


def _hashes(cluster: SimCluster, req: SimRequest) -> list[int]:
    block = cluster.cfg.block_size
    blocks = -(-req.prompt_len // block)
    shared = min(blocks, req.prefix_len // block) if req.prefix >= 0 else 0
    head = [hash(("prefix", req.prefix, i)) for i in range(shared)]
    return head + [next(cluster.hashes) for _ in range(blocks - shared)]


async def _wait(seq: Sequence) -> None:
    while seq.state != "done":
        await seq.event.wait()
        seq.event.clear()


async def serve(cluster: SimCluster, req: SimRequest, arrival: float) -> Outcome:
    """Route ``req`` as the router does and run its prefill, KV pull and decode on the chosen instances."""
    outcome = Outcome(at=req.at, kind=req.kind, ok=False)
    hashes = _hashes(cluster, req)
    exclude: set[str] = set()
    # Like the router: a failed prefill (nothing streamed yet) is retried on other pods.
    for _attempt in range(1 + cluster.retry_attempts):
        prefills = [(i.engine.name, GROUP) for i in cluster.ready("prefill")]
        decodes = [(i.engine.name, GROUP) for i in cluster.ready("decode")]
        cluster.turn += 1
        choice = choose(
            prefills,
            decodes,
            [],
            hashes[:AFFINITY_BLOCKS],
            cluster.affinity,
            cluster.inflight,
            exclude,
            cluster.turn,
        )
        if choice is None or choice.prefill is None:
            outcome.error = "no_route"
            return outcome
        if not choice.affinity_hit:
            cluster.affinity.remember(hashes[:AFFINITY_BLOCKS], choice.prefill)
        prefill = cluster.instances[choice.prefill].engine
        decode = cluster.instances[choice.decode].engine
        first = Sequence(
            request_id=prefill.new_request_id("req"),
            prompt_len=req.prompt_len,
            hashes=hashes,
            output_len=1,
            prefill_only=True,
            arrival=arrival,
        )
        cluster.inflight[prefill.name] += 1
        prefill.inflight += 1
        try:
            prefill.scheduler.submit(first)
            await _wait(first)
        finally:
            cluster.inflight[prefill.name] -= 1
            prefill.inflight -= 1
        if first.finish_reason != "abort":
            cluster._prefilled += 1
            break
        outcome.error = first.error or "prefill aborted"
        exclude.add(prefill.name)
    else:
        return outcome
    outcome.error = None
    if first.first_token_at is not None:
        outcome.prefill_ttft = first.first_token_at - arrival
    params = {
        "do_remote_prefill": True,
        "remote_engine_id": prefill.name,
        "remote_host": prefill.ip,
        "remote_port": prefill.port,
        "request_id": first.request_id,
    }
    second = Sequence(
        request_id=decode.new_request_id("req"),
        prompt_len=req.prompt_len,
        hashes=hashes,
        output_len=req.output_len,
        remote=params,
    )
    cluster.inflight[decode.name] += 1
    decode.inflight += 1
    sent = 0
    last: float | None = None
    gaps_sum, gaps_n = 0.0, 0
    try:
        decode.scheduler.submit(second)
        while True:
            await second.event.wait()
            second.event.clear()
            if second.finish_reason == "abort":
                outcome.error = second.error or "decode aborted"
                return outcome
            new = second.generated - sent
            if new > 0:
                moment = clock.now()
                if last is None:
                    outcome.ttft = moment - arrival
                    extra = new - 1
                else:
                    gaps_sum += moment - last
                    gaps_n += 1
                    extra = new - 1
                    if cluster.keep_gaps:
                        outcome.gaps.append(moment - last)
                gaps_n += extra
                if cluster.keep_gaps:
                    outcome.gaps.extend([0.0] * extra)
                last = moment
                sent = second.generated
            if second.state == "done":
                break
    finally:
        cluster.inflight[decode.name] -= 1
        decode.inflight -= 1
    outcome.ok = outcome.ttft is not None
    outcome.tbt = gaps_sum / gaps_n if gaps_n else None
    outcome.finished = clock.now()
    return outcome
