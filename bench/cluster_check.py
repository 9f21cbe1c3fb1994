"""How long Tandem's cluster operations take against the sandbox (HTTP and HTTPS).

Prints, per listener, the median and max over several runs of: the registration probe (version plus one
access review), the full health check's cluster calls (version, a SelfSubjectRulesReview plus a
SelfSubjectAccessReview for each permission its rules do not show, CRDs, nodes and pods), and
server-side apply of 20 ConfigMaps (first apply, then an unchanged re-apply).

    .venv/bin/python bench/cluster_check.py [--runs 5]
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
    configure_django("sqlite:////tmp/tandem-bench-cluster-check.sqlite3")


def report(label: str, samples: list[float]) -> None:
    _report(label, samples, width=42, decimals=1)


def run(*, tls: bool, runs: int) -> None:
    import kube
    from clusters.checks import REQUIRED_ACCESS
    from clusters.inspection import gather_facts, probe
    from sandbox.testing import SandboxCluster

    with SandboxCluster(nodes=4, accelerators=["huawei.com/ascend-1980=8"], tls=tls) as sandbox:
        ca = sandbox.ca_path.read_text() if sandbox.ca_path else None
        conn = kube.ClusterConnection(
            cluster_id=1 + int(tls),
            server=sandbox.server,
            token=sandbox.token,
            ca_data=ca,
            credential_version="bench",
            cluster_name="bench",
        )
        scheme = "https" if tls else "http"
        print(f"{sandbox.server} ({scheme}), {len(REQUIRED_ACCESS)} permissions checked per check")
        kube.get_version(conn)  # warm the connection pool
        report("registration probe", timed(lambda: probe(conn), runs))
        report("full check (cluster calls)", timed(lambda: gather_facts(conn), runs))
        kube.apply_objects(conn, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}])
        objects = [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": f"cm-{i}",
                    "namespace": "bench",
                    "labels": {"app.kubernetes.io/managed-by": "tandem"},
                },
                "data": {"i": str(i)},
            }
            for i in range(20)
        ]
        report("apply 20 objects (first)", timed(lambda: kube.apply_objects(conn, objects), 1))
        report("apply 20 objects (unchanged)", timed(lambda: kube.apply_objects(conn, objects), runs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    configure()

    for tls in (False, True):
        run(tls=tls, runs=args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
