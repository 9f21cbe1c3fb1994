"""The planner's verdicts and the sentences that explain them (PURE), shared by its rules
(``rebalancing.policy`` and ``rebalancing.demand_rules``)."""

from __future__ import annotations

from dataclasses import dataclass

from rebalancing.inputs import Observation, Params


@dataclass(frozen=True)
class Verdict:
    rule: str
    # hold | add_prefill | add_decode | move_to_prefill | move_to_decode | remove_<role>, or preparing a
    # move: stage_<role> (the donors leave routing ahead) | unstage (they are routed again)
    action: str
    prefill: int  # the target split
    decode: int
    explanation: str

    @property
    def acts(self) -> bool:
        """Whether it changes the split (a move)."""
        return self.action != "hold" and not self.prepares

    @property
    def prepares(self) -> bool:
        """Whether it stages a move's donors out of routing, or routes them again."""
        return self.action.startswith("stage_") or self.action == "unstage"


def ms(value: float | None) -> str:
    if value is None:
        return "no data"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


def queued(obs: Observation, role: str, params: Params) -> bool:
    count = obs.prefill if role == "prefill" else obs.decode
    waiting = obs.prefill_waiting if role == "prefill" else obs.decode_waiting
    return count > 0 and waiting / count > params.queue_per_instance


def donor_floor(instances: int, params: Params) -> int:
    """The fewest instances a move at the budget leaves the donor: ``donor_keeps``, but never more than
    a third of the instances (a 1P/2D topology can still move one)."""
    return max(1, min(params.donor_keeps, instances // 3))


def hold(obs: Observation, rule: str, text: str) -> Verdict:
    return Verdict(rule=rule, action="hold", prefill=obs.prefill, decode=obs.decode, explanation=text)


def breach_text(obs: Observation, role: str, streak: int, params: Params) -> str:
    if role == "prefill":
        parts = [f"TTFT p95 {ms(obs.ttft_p95_ms)} > {ms(obs.ttft_target_ms)} target"]
        if obs.prefill and obs.prefill_waiting / obs.prefill > params.queue_per_instance:
            parts = [
                f"TTFT p95 {ms(obs.ttft_p95_ms)} (target {ms(obs.ttft_target_ms)}), "
                f"{obs.prefill_waiting:.0f} requests waiting on {obs.prefill} prefill"
            ]
    else:
        parts = [f"TBT p95 {ms(obs.tbt_p95_ms)} (target {ms(obs.tbt_target_ms)})"]
        if obs.tbt_p95_ms is not None and obs.tbt_p95_ms > obs.tbt_target_ms:
            parts = [f"TBT p95 {ms(obs.tbt_p95_ms)} > {ms(obs.tbt_target_ms)} target"]
        if queued(obs, "decode", params):
            parts.append(f"{obs.decode_waiting:.0f} requests waiting on {obs.decode} decode")
        if obs.decode_kv_usage is not None and obs.decode_kv_usage > params.kv_usage_high:
            parts.append(f"decode KV usage {obs.decode_kv_usage:.0%}")
    return f"{', '.join(parts)} for {streak} intervals"


def tps(value: float) -> str:
    return f"{value / 1000:.1f}k tok/s" if value >= 1000 else f"{value:.0f} tok/s"
