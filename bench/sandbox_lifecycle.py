"""How long the sandbox takes to come up and to stop on SIGTERM with engines running.

Each run starts `python -m sandbox up` (one node, no Kthena), waits for its ready line, starts one simulated
vLLM engine pod and waits until it is Ready, then sends SIGTERM and times the exit. Prints the median and max
of start-to-ready, engine-to-Ready and SIGTERM-to-exit, and every exit code (0 is a clean stop; the harness
kills a sandbox still running after 10 s).

    .venv/bin/python bench/sandbox_lifecycle.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubernetes import client  # noqa: E402

from sandbox.testing import SandboxCluster  # noqa: E402

ENGINE = {
    "name": "vllm",
    "image": "vllm/vllm-openai:v0.10.1",
    "command": ["vllm", "serve", "m", "--port", "8000"],
}


def one_run() -> tuple[float, float, float, int | None]:
    started = time.monotonic()
    cluster = SandboxCluster(nodes=1, kthena=False, accelerators=["nvidia.com/gpu=8"]).start()
    ready = time.monotonic() - started
    try:
        core = client.CoreV1Api(cluster.api_client())
        created = time.monotonic()
        core.create_namespaced_pod(
            "default", {"metadata": {"name": "engine"}, "spec": {"containers": [ENGINE]}}
        )
        cluster.wait_for(
            lambda: any(
                s.ready for s in core.read_namespaced_pod("engine", "default").status.container_statuses or []
            ),
            timeout=30,
            message="the engine Ready",
        )
        engine_ready = time.monotonic() - created
    finally:
        stopping = time.monotonic()
        code = cluster.stop()
        stopped = time.monotonic() - stopping
    return ready, engine_ready, stopped, code


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    results = [one_run() for _ in range(runs)]
    for index, label in enumerate(("start to ready", "engine pod to Ready", "SIGTERM to exit")):
        values = [r[index] for r in results]
        print(f"{label:>20}: median {statistics.median(values):.2f} s, max {max(values):.2f} s ({runs} runs)")
    print(f"{'exit codes':>20}: {[r[3] for r in results]}")


if __name__ == "__main__":
    main()
