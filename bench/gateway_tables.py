"""The tables bench/gateway_vs_litellm.py prints: per setting as it goes, then against the targets."""

from __future__ import annotations

from dataclasses import dataclass

from loadgen import Result
from telemetry_fanout import quantile

VERDICT = {True: "met", False: "MISSED"}


@dataclass
class Cell:
    """One path at one setting, summed over its turns; cpu = its server process's CPU seconds."""

    result: Result
    cpu: float = 0.0
    wall: float = 0.0
    requests: int = 0  # warm-up included, as in cpu

    def p(self, q: float) -> float:
        return quantile(self.result.latency, q)

    def cpu_ms(self) -> float:
        return 1000 * self.cpu / max(1, self.requests)

    def busy(self) -> float:
        """Server CPU as a share of one core over the turns."""
        return self.cpu / max(self.wall, 1e-9)

    def rps(self) -> float:
        return len(self.result.latency) / max(self.result.seconds, 1e-9)


def mode(stream: bool) -> str:
    return "streaming" if stream else "non-streaming"


def print_open(upstream: str, stream: bool, rate: float, cells: dict[str, Cell]) -> None:
    direct = cells["direct"]
    print(f"\nopen loop {rate:g} req/s, {upstream} upstream, {mode(stream)}; ms, scheduled send to last byte")
    print("  path      answers   p50     p99    added p50  added p99  1st-byte p99  errors  server CPU/req")
    for path, cell in cells.items():
        r = cell.result
        added = "        -          -"
        if path != "direct":
            added = f"{cell.p(0.5) - direct.p(0.5):9.2f} {cell.p(0.99) - direct.p(0.99):10.2f}"
        print(
            f"  {path:<9} {len(r.latency):6d} {cell.p(0.5):7.2f} {cell.p(0.99):7.2f}  {added}"
            f" {quantile(r.first, 0.99):13.2f} {r.errors + r.timeouts:7d} {cell.cpu_ms():9.3f} ms"
        )


def print_closed(upstream: str, stream: bool, connections: int, cells: dict[str, Cell]) -> None:
    print(f"\nclosed loop, {connections} connections, {upstream} upstream, {mode(stream)}")
    print("  path        req/s   p50 ms   p99 ms  errors  server CPU/req  server busy  req/s per core")
    for path, cell in cells.items():
        r = cell.result
        print(
            f"  {path:<9} {cell.rps():8.0f} {cell.p(0.5):8.2f} {cell.p(0.99):8.2f} {r.errors + r.timeouts:7d}"
            f" {cell.cpu_ms():11.3f} ms {100 * cell.busy():9.0f} % {1000 / max(cell.cpu_ms(), 1e-9):13.0f}"
        )


def print_summary(
    open_rows: dict[tuple[str, bool, float], dict[str, Cell]],
    closed_rows: dict[tuple[str, bool], dict[str, Cell]],
) -> None:
    print("\nagainst the targets")
    for (upstream, stream, rate), cells in open_rows.items():
        if rate != 100:
            continue
        direct = cells["direct"].p(0.99)
        tandem = cells["tandem"].p(0.99) - direct
        if "litellm" not in cells:
            print(
                f"  added p99 at 100 req/s, {upstream}, {mode(stream):<13}  tandem {tandem:6.2f} ms "
                f"(≤ 5 ms: {VERDICT[tandem <= 5]}), litellm not run"
            )
            continue
        litellm = cells["litellm"].p(0.99) - direct
        ratio = tandem / litellm if litellm > 0 else float("nan")
        print(
            f"  added p99 at 100 req/s, {upstream}, {mode(stream):<13}  tandem {tandem:6.2f} ms "
            f"(≤ 5 ms: {VERDICT[tandem <= 5]}), litellm {litellm:8.2f} ms, "
            f"tandem/litellm {ratio:4.2f} (≤ 0.5: {VERDICT[ratio <= 0.5]})"
        )
    for (upstream, stream), cells in closed_rows.items():
        tandem = cells["tandem"]
        if "litellm" not in cells:
            print(
                f"  max req/s, one worker, {upstream}, {mode(stream):<13}  tandem {tandem.rps():5.0f}, "
                f"per core of its own CPU {1000 / max(tandem.cpu_ms(), 1e-9):.0f}; litellm not run"
            )
            continue
        litellm = cells["litellm"]
        ratio = tandem.rps() / max(litellm.rps(), 1e-9)
        per_core = litellm.cpu_ms() / max(tandem.cpu_ms(), 1e-9)
        print(
            f"  max req/s, one worker, {upstream}, {mode(stream):<13}  tandem {tandem.rps():5.0f}, "
            f"litellm {litellm.rps():4.0f}: {ratio:4.1f}× (≥ 3×: {VERDICT[ratio >= 3]}); "
            f"per core of their own CPU {1000 / tandem.cpu_ms():.0f} vs {1000 / litellm.cpu_ms():.0f} "
            f"= {per_core:.1f}×"
        )
