"""vllm-ascend's LLM-DataDist links are named by NPU device IPs: telemetry ties them to pods through the
Ascend device plugin's annotation, and scrapes MindIE's /metrics on its metrics plane (docs/ascend.md).

The log lines are written as vllm-ascend writes them (vllm-project/vllm-ascend 848419d1ba89,
vllm_ascend/distributed/llmdatadist_c_mgr_connector.py, lines 679, 784-808, 969: the last commit
before the connector's removal), behind vLLM's log prefix."""

from __future__ import annotations

import json

import aiohttp

from kube.workloads import PodInfo
from sandbox.engine.testing import PDStack
from telemetry.assemble import LinkInputs, PodResult, PodTarget, build_snapshot, empty_state
from telemetry.links import PairInput, engine_view, pair_link
from telemetry.logscan import for_pair, scan
from telemetry.services import pod_targets
from telemetry.targets import scrape_port

P0, P1, D = "prefill-0", "prefill-1", "decode-0"
P0_DEV, P1_DEV, D_DEV = "29.11.3.1", "29.11.3.2", "29.11.9.1"  # NPU device IPs, never pod IPs
PAIR0 = PairInput(P0, D, "10.0.0.5", "10.0.0.7", (P0_DEV,), (D_DEV,))
PAIR1 = PairInput(P1, D, "10.0.0.6", "10.0.0.7", (P1_DEV,), (D_DEV,))
KNOWN = frozenset({"10.0.0.5", "10.0.0.6", "10.0.0.7", P0_DEV, P1_DEV, D_DEV})
PREFIX = "(VllmWorker rank=0 pid=812) {level} 12-02 21:40:{s:02d} [llmdatadist_c_mgr_connector.py:{line}] "


def vllm(level: str, line: int, message: str, s: int = 0) -> str:
    return PREFIX.format(level=level, s=s, line=line) + message


def linked(prefill_dev: str, cluster: int, s: int = 0) -> list[str]:
    name = f"pd_comm_{prefill_dev}_{D_DEV}"
    return [
        vllm("INFO", 784, f"LLMDataDistCMgrConnectorWorker: try link with remote, comm id: {name}", s),
        vllm("INFO", 788, f"comm name: {name}", s),
        vllm("INFO", 795, "LLMDataDistCMgrConnectorWorker: Linking success, comm id: 1", s),
        vllm("INFO", 807, f"Successfully build link with cluster id {cluster} with cluster name {name} !", s),
    ]


def pulled_and_timed_out(cluster: int) -> list[str]:
    return [
        vllm("INFO", 969, f"remote cluster id is: {cluster}", 5),
        vllm("INFO", 1029, "Try pull blocks from remote server", 5),
        vllm(
            "ERROR",
            679,
            "KV transfer task failed: LLMDataDistCMgrConnectorWorker: Timeout during pull_blocks, you can "
            "try to increase the sync_kv_timeout config or checking your connect status",
            25,
        ),
    ]


def split(findings, pair):
    return for_pair(
        findings,
        prefill=pair.prefill,
        decode=pair.decode,
        prefill_ip=pair.prefill_ip,
        decode_ip=pair.decode_ip,
        probe_requests=[],
        prefill_devices=pair.prefill_devices,
        decode_devices=pair.decode_devices,
        known=KNOWN,
    )


def test_a_timed_out_pull_is_the_pair_of_the_prefill_whose_device_ip_the_link_named():
    clusters: dict[str, str] = {}
    own = frozenset({"10.0.0.7", D_DEV})
    findings = scan(D, [*linked(P0_DEV, 1), *linked(P1_DEV, 2), *pulled_and_timed_out(2)], clusters, own)
    assert clusters == {"1": P0_DEV, "2": P1_DEV}
    assert [(f["kind"], f["peer_address"]) for f in findings] == [("transfer_failed", P1_DEV)]
    assert split(findings, PAIR1) == (findings, [])
    assert split(findings, PAIR0) == ([], [])  # another pair's failure, not this one's nor the pod's
    sample = pair_link(
        pair=PAIR1, view=engine_view("vllm-ascend", "llm-datadist"), window=None, probe=None,
        findings=findings, known=KNOWN, links_of_decode=2, now=1000.0, interval_s=2.0, metrics_ts=None,
    )  # fmt: skip
    assert sample["state"] == "down" and "prefill-1 to decode-0 failed" in str(sample["reason"])


def test_a_failed_link_names_its_pair_and_a_device_ip_of_no_pod_counts_against_the_pod():
    name = f"pd_comm_{P0_DEV}_{D_DEV}"
    lines = [
        vllm("INFO", 784, f"LLMDataDistCMgrConnectorWorker: try link with remote, comm id: {name}"),
        vllm(
            "ERROR",
            679,
            "KV transfer task failed: LLMDataDistCMgrConnectorWorker: Linking failed, comm id: 7",
        ),
    ]
    findings = scan(D, lines, {}, frozenset({D_DEV}))
    assert [(f["kind"], f["peer_address"]) for f in findings] == [("link_failed", P0_DEV)]
    assert split(findings, PAIR0)[0] == findings
    stranger = scan(D, [line.replace(P0_DEV, "29.11.3.99") for line in lines], {}, frozenset({D_DEV}))
    assert split(stranger, PAIR0) == ([], stranger) == split(stranger, PAIR1)


def test_the_prefill_side_maps_the_decodes_cluster_to_the_decode():
    # add_remote_agent runs on the prefill too (its metadata listener): the name is still pd_comm_<p>_<d>.
    clusters: dict[str, str] = {}
    line = f"Successfully build link with cluster id 9 with cluster name pd_comm_{P0_DEV}_{D_DEV} !"
    scan(P0, [vllm("INFO", 807, line)], clusters, frozenset({"10.0.0.5", P0_DEV}))
    assert clusters == {"9": D_DEV}


def _pod(name: str, ports: tuple[int, ...], annotations: dict[str, str]) -> PodInfo:
    return PodInfo(
        name=name, namespace="ns", ip="10.0.0.7", node="n", phase="Running", ready=True, reason="",
        message="", restarts=0, labels={"tandem.io/role": "decode"}, container_ports=ports,
        annotations=annotations,
    )  # fmt: skip


def test_targets_carry_device_ips_and_mindie_is_scraped_on_its_metrics_plane():
    plugin = {"pod_name": "d", "server_id": "10.1.0.2", "devices": [{"device_id": "0", "device_ip": D_DEV}]}
    annotated = _pod(
        "d",
        (8000, 26000, 8002),
        {"ascend.kubectl.kubernetes.io/ascend-910-configuration": json.dumps(plugin)},
    )
    [mindie] = pod_targets([annotated], engine="mindie", spec_port=8000)
    assert (mindie.port, mindie.devices) == (8002, (D_DEV,))
    [vllm_pod] = pod_targets([annotated], engine="vllm-ascend", spec_port=8000)
    assert vllm_pod.port == 8000
    assert scrape_port("mindie", (1025, 1026, 1027), 1025) == 1027  # MindIE's own default layout
    assert scrape_port("mindie", (8000,), 8000) == 8000  # a config with one port serves /metrics there
    assert pod_targets([_pod("x", (), {})], engine="mindie")[0].devices == ()


async def test_the_sandboxs_vllm_ascend_names_device_ips_and_telemetry_ties_each_failure_to_its_pair():
    env = {"SANDBOX_TIME_SCALE": "0.05"}
    async with (
        PDStack(prefill=3, kv_connector="LLMDataDistCMgrConnector", npus=1, env=env) as stack,
        aiohttp.ClientSession() as session,
    ):
        engines = {name: stack.farm.engine(f"sim/{name}") for name, _, _ in stack.pods}
        devices = {name: engine.spec.device_ips for name, engine in engines.items() if engine}
        ips = {name: engine.ip for name, engine in engines.items() if engine}
        decode = stack.url("decode-0-0")
        body = {"model": "sim-model", "prompt": "hello " * 40, "max_tokens": 1}

        async def through(prefill: str, fault: bool = False) -> None:
            if fault:
                await session.post(f"{decode}/sandbox/faults", json={"kind": "link_down", "peer": prefill})
            first = {**body, "kv_transfer_params": {"do_remote_decode": True}}
            async with session.post(f"{stack.url(prefill)}/v1/completions", json=first) as r:
                params = (await r.json())["kv_transfer_params"]
            second = {**body, "kv_transfer_params": params}
            async with session.post(f"{decode}/v1/completions", json=second) as r:
                await r.read()

        # links to prefill-0-0 and -0-1 are built by traffic; then the one to -0-1 dies and a pull over
        # it times out; the one to -0-2 is dead before it was ever built, so linking fails
        await through("prefill-0-0")
        await through("prefill-0-1")
        await through("prefill-0-1", fault=True)
        await through("prefill-0-2", fault=True)
        lines = stack.farm.logs("sim/decode-0-0")
    assert any(f"pd_comm_{devices['prefill-0-0'][0]}_{devices['decode-0-0'][0]}" in line for line in lines)
    assert not any(f"pd_comm_{ips['prefill-0-0']}" in line for line in lines)  # device IPs, not pod IPs
    own = frozenset({ips["decode-0-0"], *devices["decode-0-0"]})
    findings = scan("decode-0-0", lines, {}, own)
    assert [f["kind"] for f in findings] == ["transfer_failed", "link_failed"]
    known = frozenset(ips.values()) | {d for ds in devices.values() for d in ds}
    for prefill, expected in (
        ("prefill-0-0", []),
        ("prefill-0-1", findings[:1]),
        ("prefill-0-2", findings[1:]),
    ):
        mine, unattributed = for_pair(
            findings, prefill=prefill, decode="decode-0-0", prefill_ip=ips[prefill],
            decode_ip=ips["decode-0-0"], probe_requests=[], prefill_devices=devices[prefill],
            decode_devices=devices["decode-0-0"], known=known,
        )  # fmt: skip
        assert (mine, unattributed) == (expected, []), prefill


def test_a_collection_ties_the_decodes_timeout_to_the_pair_through_the_pods_device_ips():
    """The whole collection: pod targets carry device IPs, the decode's log is scanned with its own
    addresses, and only the pair whose prefill's device IP the link line named is down."""
    targets = [
        PodTarget(P0, "prefill", "10.0.0.5", 8000, True, "Running", devices=(P0_DEV,)),
        PodTarget(P1, "prefill", "10.0.0.6", 8000, True, "Running", devices=(P1_DEV,)),
        PodTarget(D, "decode", "10.0.0.7", 8000, True, "Running", devices=(D_DEV,)),
    ]
    inputs = LinkInputs(
        view=engine_view("vllm-ascend", "llm-datadist"),
        logs={D: [*linked(P0_DEV, 1), *linked(P1_DEV, 2), *pulled_and_timed_out(2)]},
    )
    snapshot, state, _ = build_snapshot(
        topology_id=1, ts=1000.0, interval_s=2.0, results=[PodResult(target=t) for t in targets],
        state=empty_state(), slo_ttft_ms=None, slo_tbt_ms=None, open_alerts=set(), alert_intervals=3,
        link_slow_ms=250.0, events=[], link_inputs=inputs,
    )  # fmt: skip
    states = {(link["prefill"], link["decode"]): link["state"] for link in snapshot["links"]}
    assert states[(P1, D)] == "down" and states[(P0, D)] != "down"
    assert state["clusters"] == {"1": P0_DEV, "2": P1_DEV}


def test_a_peer_named_by_url_is_matched_by_its_host():
    line = "ERROR 12-02 21:40:00 [mooncake_connector.py:903] Failed to connect to bootstrap server "
    findings = scan(D, [line + "http://10.0.0.6:8998/query (ConnectError): refused"], {})
    assert findings[0]["kind"] == "link_failed"
    assert split(findings, PAIR1) == (findings, []) and split(findings, PAIR0) == ([], [])
