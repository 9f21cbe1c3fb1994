"""The what-if needs nothing from the sandbox: its simulator child runs with every ``sandbox`` import
refused, and no product module imports the sandbox (only the sandbox itself, the benchmarks, the demo
runner that drives the sandbox, and tests do)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from whatif import simulation

ROOT = Path(__file__).resolve().parents[2]
# Installed before anything else in the child: a finder that refuses the sandbox package, as on an
# install that does not ship it.
REFUSE_SANDBOX = """
import importlib.abc, sys

class NoSandbox(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "sandbox" or name.startswith("sandbox."):
            raise ModuleNotFoundError(f"No module named {name!r} (no sandbox on this install)", name=name)
        return None

sys.meta_path.insert(0, NoSandbox())
"""
RUN_SIMULATOR = (
    REFUSE_SANDBOX
    + """
import runpy
runpy.run_module("perfmodel.sim", run_name="__main__", alter_sys=True)
assert not any(m == "sandbox" or m.startswith("sandbox.") for m in sys.modules), "the sandbox was imported"
"""
)


def _history() -> dict[str, object]:
    start = 1_700_000_000.0
    return {
        "start": start,
        "step": 60,
        "timestamps": [start, start + 60],
        "series": {
            "topology.requests_ps": [0.5, 0.5],
            "topology.prompt_tps": [200.0, 200.0],
            "topology.gen_tps": [10.0, 10.0],
        },
    }


def test_the_refusal_is_real():
    done = subprocess.run(
        [sys.executable, "-c", REFUSE_SANDBOX + "import sandbox.engine.engine"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode != 0 and "no sandbox on this install" in done.stderr


def test_the_what_if_simulation_runs_without_the_sandbox():
    replay = simulation.replay_plan(recorded=_history(), splits=[(1, 1)], ttft_ms=2000.0, tbt_ms=200.0)
    answer = simulation.run_simulator(
        simulation.simulator_request(replay, (1, 1)), command=(sys.executable, "-c", RUN_SIMULATOR)
    )
    (row,) = answer["splits"]
    assert (row["prefill"], row["decode"]) == (1, 1)
    assert row["failed"] == 0 and 0.9 <= row["attainment"] <= 1.0 and row["goodput_rps"] > 0


def test_no_product_module_imports_the_sandbox():
    allowed = {"sandbox", "bench", "standalone", "tests", "node_modules", "var", "docs"}
    pattern = re.compile(r"^\s*(from\s+sandbox[\s.]|import\s+sandbox\b)", re.MULTILINE)
    offenders = []
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).parts
        if parts[0] in allowed or parts[0].startswith(".") or "tests" in parts:
            continue
        if path.name in ("conftest.py",) or path.name.startswith("test_"):
            continue
        if pattern.search(path.read_text(encoding="utf-8")):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
