"""A telemetry snapshot (``telemetry.snapshot.TopologySnapshot``) as the planner's observation (PURE)."""

from __future__ import annotations

from typing import Any

from rebalancing.policy import Observation


def _ms(seconds: Any) -> float | None:
    return float(seconds) * 1000 if isinstance(seconds, (int, float)) else None


def observation_from_snapshot(
    snapshot: Any,
    *,
    prefill: int,
    decode: int,
    ttft_target_ms: float,
    tbt_target_ms: float,
    busy: str,
    now: float,
    in_place: bool = False,
) -> Observation:
    """TTFT/TBT p95 against the targets, queue depth, KV usage, prefix hit rate, finished requests/s and
    Ready instances per role, token rates, links down."""
    if snapshot is None:
        return Observation(
            ts=now,
            prefill=prefill,
            decode=decode,
            ttft_p95_ms=None,
            tbt_p95_ms=None,
            ttft_target_ms=ttft_target_ms,
            tbt_target_ms=tbt_target_ms,
            stale=True,
            busy=busy,
            in_place=in_place,
        )
    roles = snapshot.get("roles") or {}
    p_role: dict[str, Any] = dict(roles.get("prefill") or {})
    d_role: dict[str, Any] = dict(roles.get("decode") or {})
    slo = snapshot.get("slo") or {}
    totals: dict[str, Any] = dict(snapshot.get("totals") or {})
    down = [
        f"{link['prefill']} → {link['decode']}"
        for link in snapshot.get("links") or []
        if link.get("state") == "down"
    ]

    def number(role: dict[str, Any], key: str) -> float | None:
        value = role.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def count(role: dict[str, Any]) -> int | None:
        value = role.get("ready")
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else None

    ttft = slo.get("ttft_p95_ms")
    tbt = slo.get("tbt_p95_ms")
    return Observation(
        ts=now,
        prefill=prefill,
        decode=decode,
        ttft_p95_ms=float(ttft) if isinstance(ttft, (int, float)) else _ms(totals.get("ttft_p95")),
        tbt_p95_ms=float(tbt) if isinstance(tbt, (int, float)) else _ms(totals.get("tbt_p95")),
        ttft_target_ms=ttft_target_ms,
        tbt_target_ms=tbt_target_ms,
        prefill_waiting=float(p_role.get("waiting") or 0.0),
        decode_waiting=float(d_role.get("waiting") or 0.0),
        prefill_kv_usage=p_role.get("kv_usage"),
        decode_kv_usage=d_role.get("kv_usage"),
        # The prefill role's prompt tokens and the decode role's generated ones (a decode instance also
        # counts the prompts it receives, so the topology's totals would count them twice).
        prompt_tps=number(p_role, "prompt_tps") if p_role else totals.get("prompt_tps"),
        gen_tps=number(d_role, "gen_tps") if d_role else totals.get("gen_tps"),
        links_down=down,
        stale=(snapshot.get("health") or {}).get("state") == "stale",
        busy=busy,
        in_place=in_place,
        prefill_ttft_p95_ms=_ms(p_role.get("ttft_p95")),
        prefill_hit_rate=number(p_role, "hit_rate"),
        prefill_requests_ps=number(p_role, "requests_ps"),
        decode_requests_ps=number(d_role, "requests_ps"),
        prefill_ready=count(p_role),
        decode_ready=count(d_role),
    )
