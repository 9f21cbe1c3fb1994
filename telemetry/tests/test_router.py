"""The Kthena router's match-ratio histogram: parsed per model, its replicas found from the metrics
Service's Endpoints, and turned into per-interval increments (pure)."""

from __future__ import annotations

from telemetry.parse import parse_metrics
from telemetry.router import increments, match_counts, replica_targets
from telemetry.series import is_valid_series_name, snapshot_points

# kthena-router's exposition of the histogram (pkg/kthena-router/metrics/metrics.go: buckets 0, 0.1,
# 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1; label model), with two models served by the one router.
HELP = (
    "Fraction of the prompt's blocks the best-matching candidate pod had already cached, "
    "per prefix-cache match attempt (0 = miss)"
)
EXPOSITION = f"""# HELP kthena_router_prefix_cache_match_ratio {HELP}
# TYPE kthena_router_prefix_cache_match_ratio histogram
{{lines}}# HELP kthena_router_requests_total Total number of HTTP requests processed by the router
# TYPE kthena_router_requests_total counter
kthena_router_requests_total{{{{model="chat",path="/v1/completions",status_code="200",error_type=""}}}} 40
"""
BOUNDS = ("0", "0.1", "0.25", "0.5", "0.75", "0.9", "0.95", "0.99", "1", "+Inf")


def _histogram(model: str, cumulative: list[int], total: float) -> str:
    lines = [
        f'kthena_router_prefix_cache_match_ratio_bucket{{model="{model}",le="{le}"}} {n}'
        for le, n in zip(BOUNDS, cumulative, strict=True)
    ]
    lines.append(f'kthena_router_prefix_cache_match_ratio_sum{{model="{model}"}} {total}')
    lines.append(f'kthena_router_prefix_cache_match_ratio_count{{model="{model}"}} {cumulative[-1]}')
    return "\n".join(lines) + "\n"


def test_the_match_ratio_is_read_per_model_its_count_and_its_zero_bucket():
    text = EXPOSITION.format(
        lines=_histogram("chat", [10, 10, 10, 12, 12, 12, 12, 12, 30, 30], 19.0)
        + _histogram("code", [3, 3, 3, 3, 3, 3, 3, 3, 5, 5], 2.0)
    )
    raw = parse_metrics(text, ts=1.0)
    assert match_counts(raw, "chat") == (30.0, 10.0)
    assert match_counts(raw, "code") == (5.0, 3.0)
    assert match_counts(raw, "other") is None
    assert raw["counters"]["router_2xx"] == 40.0  # the router's other readings are unchanged


def test_replicas_come_from_the_metrics_port_of_ready_addresses_named_after_their_pods():
    endpoints = {
        "subsets": [
            {
                "addresses": [
                    {"ip": "10.0.0.5", "targetRef": {"kind": "Pod", "name": "kthena-router-7c9-abcde"}},
                    {"ip": "10.0.0.6"},
                ],
                "notReadyAddresses": [{"ip": "10.0.0.7"}],
                "ports": [{"name": "http", "port": 8080}, {"name": "metrics", "port": 9090}],
            },
            {"addresses": [{"ip": "10.0.0.8"}], "ports": [{"name": "http", "port": 8080}, {"port": 1}]},
        ]
    }
    targets = replica_targets(endpoints)
    assert [(t.name, t.ip, t.port, t.role) for t in targets] == [
        ("kthena-router-7c9-abcde", "10.0.0.5", 9090, "router"),
        ("10.0.0.6", "10.0.0.6", 9090, "router"),
    ]
    assert replica_targets({}) == []


def test_increments_sum_the_replicas_read_twice_and_a_restart_counts_from_zero():
    previous = {"a": (100.0, 40.0), "b": (50.0, 10.0)}
    current = {"a": (130.0, 45.0), "b": (4.0, 1.0), "c": (9.0, 9.0)}  # b restarted, c is new
    assert increments(previous, current) == (30.0 + 4.0, 5.0 + 1.0)
    assert increments({}, current) is None  # a first reading is only a baseline


def test_the_router_increments_are_stored_series():
    from telemetry.snapshot import empty_snapshot

    snapshot = empty_snapshot(1, 100.0, 2.0, "")
    snapshot["router"] = {
        "service": "kthena-system/kthena-router-metrics",
        "replicas": 1,
        "match_attempts": 12.0,
        "match_misses": 3.0,
        "error": None,
    }
    points = dict(snapshot_points(snapshot))
    assert points["router.match_attempts"] == 12.0 and points["router.match_misses"] == 3.0
    assert is_valid_series_name("router.match_attempts") and not is_valid_series_name("router.other")


def test_an_address_without_a_pod_is_read_through_the_services_proxy():
    from kube.proxy import ProxyTransport
    from telemetry.assemble import PodTarget
    from telemetry.router import ServiceProxyTransport

    proxy = ProxyTransport("https://api.example:6443/", {"Authorization": "Bearer t"}, None)
    transport = ServiceProxyTransport("kthena-system", "kthena-router-metrics", proxy)
    target = PodTarget("10.0.0.6", "router", "10.0.0.6", 9090, True, "Running")
    assert transport.url(target, "metrics") == (
        "https://api.example:6443/api/v1/namespaces/kthena-system/services/kthena-router-metrics:9090/proxy/metrics"
    )
    assert transport.headers == {"Authorization": "Bearer t"} and transport.kind == "proxy"
    assert transport.failure(403, "", "u") == (
        "metrics source proxy: 403 from API server, grant get on services/proxy "
        "(apiGroups: [''], resources: ['services/proxy'], verbs: ['get'])"
    )
