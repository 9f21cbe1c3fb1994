"""What the engines show about KV transfers and errors is what real engines show: connector log lines
in their real formats (naming vLLM's request id from X-Request-Id), connector metric families, HTTP
status counters; the link table is only on the sandbox's control path."""

from __future__ import annotations

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sandbox.engine.testing import PDStack

FAST = {"SANDBOX_TIME_SCALE": "0.05"}


async def _metrics(session: aiohttp.ClientSession, url: str) -> dict[tuple[str, tuple], float]:
    async with session.get(f"{url}/metrics") as response:
        text = await response.text()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def _through_pair(
    session: aiohttp.ClientSession, prefill: str, decode: str, request_id: str, prompt: str = "hello " * 40
) -> int:
    """vLLM's P/D protocol by hand: prefill with do_remote_decode, then decode with its kv params."""
    body = {"model": "sim-model", "prompt": prompt, "max_tokens": 1}
    headers = {"X-Request-Id": request_id}
    first = {**body, "kv_transfer_params": {"do_remote_decode": True}}
    async with session.post(f"{prefill}/v1/completions", json=first, headers=headers) as response:
        assert response.status == 200
        params = (await response.json())["kv_transfer_params"]
    async with session.post(
        f"{decode}/v1/completions", json={**body, "kv_transfer_params": params}, headers=headers
    ) as response:
        await response.read()
        return response.status


@pytest.mark.parametrize(
    ("connector", "side", "expected", "failed_metric"),
    [
        (
            "NixlConnector",
            "decode",
            "NIXL transfer failed for request cmpl-probe-1-0 with state ERR. Marking blocks as invalid.",
            "vllm:nixl_num_failed_transfers_total",
        ),
        (
            "MooncakeConnectorV1",
            "prefill",
            "Failed to transfer KV cache for request cmpl-probe-1-0: ",
            "vllm:mooncake_num_failed_transfers_total",
        ),
        (
            "LLMDataDistCMgrConnector",
            "decode",
            "LLMDataDistCMgrConnectorWorker: Timeout during pull_blocks, you can try to increase the "
            "sync_kv_timeout config or checking your connect status",
            None,
        ),
    ],
)
async def test_a_dead_link_is_logged_as_the_real_connector_logs_it(connector, side, expected, failed_metric):
    async with PDStack(kv_connector=connector, env=FAST) as stack, aiohttp.ClientSession() as session:
        prefill, decode = stack.url("prefill-0-0"), stack.url("decode-0-0")
        assert await _through_pair(session, prefill, decode, "probe-0") == 200
        async with session.post(
            f"{decode}/sandbox/faults", json={"kind": "link_down", "peer": "prefill-0-0"}
        ) as r:
            assert r.status == 201
        assert await _through_pair(session, prefill, decode, "probe-1") == 200  # recomputed, as vLLM does
        lines = stack.farm.logs(f"sim/{side}-0-0")
        failures = [line for line in lines if expected in line]
        assert failures and failures[0].startswith("ERROR "), lines[-6:]
        metrics = await _metrics(session, decode)
        names = {name for name, _ in metrics}
        if failed_metric is None:
            assert not any("xfer" in name or "transferred" in name for name in names)  # LLM-DataDist has none
            built = [line for line in stack.farm.logs("sim/decode-0-0") if "Successfully build link" in line]
            assert built and "cluster name pd_comm_" in built[0]
        else:
            assert sum(v for (name, _), v in metrics.items() if name == failed_metric) == 1


async def test_the_link_table_is_only_on_the_sandbox_control_path():
    async with PDStack(env=FAST) as stack, aiohttp.ClientSession() as session:
        async with session.get(f"{stack.url('decode-0-0')}/kv/links") as response:
            assert response.status == 404  # real engines have no such route
        async with session.get(f"{stack.url('decode-0-0')}/sandbox/kv/links") as response:
            assert response.status == 200 and "links" in await response.json()


async def test_every_answer_is_counted_by_status_class_like_vllms_api_server():
    async with PDStack(kv_connector=None, env=FAST) as stack, aiohttp.ClientSession() as session:
        url = stack.url("prefill-0-0")
        body = {"model": "sim-model", "prompt": "hi", "max_tokens": 1}
        async with session.post(f"{url}/v1/completions", json=body) as response:
            assert response.status == 200
        await session.post(f"{url}/sandbox/faults", json={"kind": "http_5xx", "count": 2})
        await session.post(f"{url}/sandbox/faults", json={"kind": "http_429", "count": 1})
        for _ in range(3):
            async with session.post(f"{url}/v1/completions", json=body) as response:
                await response.read()
        metrics = await _metrics(session, url)
        by_status = {
            dict(labels)["status"]: value
            for (name, labels), value in metrics.items()
            if name == "http_requests_total" and dict(labels)["handler"] == "/v1/completions"
        }
        assert by_status == {"2xx": 1.0, "4xx": 1.0, "5xx": 2.0}


async def test_mindie_counts_failed_answers():
    async with PDStack(engine="mindie", env=FAST) as stack, aiohttp.ClientSession() as session:
        url = stack.url("decode-0-0")
        await session.post(f"{url}/sandbox/faults", json={"kind": "http_5xx", "count": 2})
        for _ in range(2):
            async with session.post(f"{url}/v1/completions", json={"prompt": "x", "max_tokens": 1}) as r:
                assert r.status == 503
        metrics = await _metrics(session, url)
        assert sum(v for (name, _), v in metrics.items() if name == "request_failed_total") == 2


def _by_source(metrics: dict[tuple[str, tuple], float]) -> dict[str, float]:
    return {
        dict(labels)["source"]: value
        for (name, labels), value in metrics.items()
        if name == "vllm:prompt_tokens_by_source_total"
    }


BASE = (("engine", "0"), ("model_name", "sim-model"))


async def test_a_connector_delivering_nothing_and_kv_expiring_show_only_in_the_engines_counters():
    """kv_not_delivered: the decode prefills the prompt itself and answers 200, no failure counted;
    kv_expire: the prefill's held KV expires (vllm:nixl_num_kv_expired_reqs on the prefill)."""
    async with PDStack(env=FAST) as stack, aiohttp.ClientSession() as session:
        prefill, decode = stack.url("prefill-0-0"), stack.url("decode-0-0")
        assert await _through_pair(session, prefill, decode, "ok-0") == 200
        received = _by_source(await _metrics(session, decode))
        assert received["external_kv_transfer"] > 0 and received["local_compute"] == 0, received
        fault = {"kind": "kv_not_delivered", "count": 1}
        assert (await session.post(f"{decode}/sandbox/faults", json=fault)).status == 201
        assert await _through_pair(session, prefill, decode, "silent-0", "other " * 40) == 200
        silent = await _metrics(session, decode)
        assert _by_source(silent)["external_kv_transfer"] == received["external_kv_transfer"]
        assert _by_source(silent)["local_compute"] >= 40, _by_source(silent)
        assert silent[("vllm:nixl_num_failed_transfers_total", BASE)] == 0
        assert (await _metrics(session, prefill))[("vllm:nixl_num_kv_expired_reqs_total", BASE)] == 0
        fault = {"kind": "kv_expire", "count": 1}
        assert (await session.post(f"{prefill}/sandbox/faults", json=fault)).status == 201
        assert (
            await _through_pair(session, prefill, decode, "late-0", "third " * 40) == 200
        )  # recomputed on decode
        assert (await _metrics(session, prefill))[("vllm:nixl_num_kv_expired_reqs_total", BASE)] == 1


async def test_a_mooncake_prefill_serves_tent_metrics_and_the_fallback_fault_moves_transfers_to_tcp():
    """TENT's /metrics on its own port in the real shape (kvcache-ai/Mooncake tent_metrics.h), parsed by
    telemetry into the fields the "KV transport fell back" problem is judged on."""
    from telemetry.datapath import PodWindow, transport_fallback
    from telemetry.derive import pod_window
    from telemetry.parse import LineParser

    env = {**FAST, "TENT_METRICS_ENABLED": "true", "TENT_METRICS_HTTP_PORT": "9100"}
    async with (
        PDStack(kv_connector="MooncakeConnectorV1", env=env) as stack,
        aiohttp.ClientSession() as session,
    ):
        prefill, decode = stack.url("prefill-0-0"), stack.url("decode-0-0")
        tent = prefill.rsplit(":", 1)[0] + ":9100"
        async with session.get(f"{tent}/v1/models") as response:
            assert response.status == 404  # that port serves TENT's metrics only
        assert await _through_pair(session, prefill, decode, "rdma-0") == 200
        async with session.get(f"{tent}/metrics") as response:
            before_text = await response.text()
        assert "# TYPE tent_write_bytes_total counter" in before_text
        before = await _metrics(session, tent)
        assert before[("tent_write_bytes_total", (("transport", "rdma"),))] > 0
        assert not any(name == "tent_transport_failover_total" for name, _ in before)
        fault = {"kind": "kv_transport_fallback", "count": 1}
        assert (await session.post(f"{prefill}/sandbox/faults", json=fault)).status == 201
        assert await _through_pair(session, prefill, decode, "tcp-0", "other " * 40) == 200
        async with session.get(f"{tent}/metrics") as response:
            after_text = await response.text()
        after = await _metrics(session, tent)
        assert after[("tent_transport_failover_total", (("from", "rdma"), ("to", "tcp")))] == 1
        assert after[("tent_write_bytes_total", (("transport", "tcp"),))] > 0
    parser = LineParser()
    first, second = parser.parse(before_text, ts=1.0), parser.parse(after_text, ts=3.0)
    window, _ = pod_window(second, first)
    problem = transport_fallback([PodWindow("prefill-0-0", "prefill", window, None)], 2.0)
    assert problem is not None and problem["name"] == "KV transport fell back"
    assert "rdma → tcp ×1" in problem["detail"] and "over TCP" in problem["detail"], problem["detail"]
    from gateway.pdcheck import judge_pd

    snapshot = {"interval_s": 2.0, "ts": 3.0, "roles": {"prefill": {}, "decode": {}}}
    passed, summary, _ = judge_pd({**snapshot, "health": {"problems": [problem]}}, now=3.5)
    assert not passed and "KV transport fell back" in summary, summary


async def test_telemetry_reads_tent_as_part_of_its_pod_and_names_an_unanswering_tent_port():
    from telemetry.assemble import PodTarget
    from telemetry.scrape import ScrapeRequest, scrape_pod

    env = {**FAST, "TENT_METRICS_ENABLED": "true", "TENT_METRICS_HTTP_PORT": "9100"}
    async with (
        PDStack(kv_connector="MooncakeConnectorV1", env=env) as stack,
        aiohttp.ClientSession() as session,
    ):
        prefill, decode = stack.url("prefill-0-0"), stack.url("decode-0-0")
        assert await _through_pair(session, prefill, decode, "rdma-0") == 200
        ip, port = prefill.removeprefix("http://").rsplit(":", 1)
        target = PodTarget("prefill-0-0", "prefill", ip, int(port), True, "Running", tent_port=9100)
        read = await scrape_pod(session, ScrapeRequest(target), timeout_s=2.0)
        assert read.tent_error is None and read.raw is not None
        assert read.raw["counters"]["tent_bytes_rdma"] > 0
        assert any(name.startswith("vllm:") or "prompt" in name for name in read.raw["counters"])
        silent = PodTarget("prefill-0-0", "prefill", ip, int(port), True, "Running", tent_port=9101)
        unread = await scrape_pod(session, ScrapeRequest(silent), timeout_s=2.0)
        assert unread.raw is not None and "tent_bytes_rdma" not in unread.raw["counters"]
        assert unread.tent_error is not None
        assert unread.tent_error.startswith("transfer engine metrics unreachable on :9101"), unread.tent_error
