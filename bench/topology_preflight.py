"""How long topology validation, rendering and preflight take.

Prints the median and max of: spec validation + rendering for each seed preset on both backends
(pure), and a full preflight (facts read from the cluster through ``kube`` over HTTP, then the
checks) against a 4-node sandbox — what the editor's live preflight costs per keystroke pause.

    .venv/bin/python bench/topology_preflight.py [--runs 20]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from timing import configure_django, timed  # noqa: E402
from timing import report as _report  # noqa: E402


def configure() -> None:
    configure_django("sqlite:////tmp/tandem-bench-topology.sqlite3")


def report(label: str, samples: list[float]) -> None:
    _report(label, samples, width=52, decimals=2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    configure()

    from clusters.models import AuthMethod, Cluster
    from sandbox.testing import SandboxCluster
    from topologies.presets import PRESETS, preset_spec
    from topologies.render import render
    from topologies.services import spec_preflight
    from topologies.spec import TopologySpec

    print("validate + render (pure)")
    for key in PRESETS:
        for backend in ("kthena", "deployments"):
            data = preset_spec(key, backend=backend)

            def once(data: dict[str, object] = data) -> object:
                return render(TopologySpec.from_dict(data), topology_id=1, revision=1)

            count = len(once())
            report(f"{key} / {backend} ({count} objects)", timed(once, args.runs))

    with SandboxCluster(nodes=4, accelerators=["huawei.com/ascend-1980=8"]) as sandbox:
        cluster = Cluster(
            pk=1,
            name="bench",
            auth_method=AuthMethod.TOKEN,
            server=sandbox.server,
            token=sandbox.token,
            credential_version="bench",
        )
        print(f"preflight against the sandbox at {sandbox.server} (4 nodes × 8 huawei.com/ascend-1980)")
        for label, data in (
            (
                "ascend mooncake, namespace exists",
                preset_spec("deepseek-ascend-mooncake", namespace="default"),
            ),
            ("ascend mooncake, namespace missing", preset_spec("deepseek-ascend-mooncake")),
            (
                "ascend mooncake-store (master lookup)",
                preset_spec(
                    "deepseek-ascend-mooncake",
                    namespace="default",
                    connector={
                        "type": "mooncake-store",
                        "master_address": "mooncake-master.default.svc:50051",
                    },
                ),
            ),
            (
                "plain backend (9 objects checked)",
                preset_spec("deepseek-ascend-mooncake", namespace="default", backend="deployments"),
            ),
        ):
            findings = spec_preflight(cluster=cluster, spec=data)
            codes = ",".join(f.code for f in findings) or "clean"
            report(
                f"{label} [{codes}]",
                timed(lambda data=data: spec_preflight(cluster=cluster, spec=data), args.runs),
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
