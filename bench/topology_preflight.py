"""How long topology validation, rendering and preflight take.

Prints the median and max of: spec validation + rendering for each seed preset on both backends
(pure), and a full preflight (facts read from the cluster through ``kube`` over HTTP, then the
checks) against a 4-node sandbox — what the editor's live preflight costs per keystroke pause — as
the admin and as a ServiceAccount bound to exactly docker/k8s/rbac.yaml (RBAC enforced on every
request; preflight's permission check in the target namespace: a rules review per scope, access
reviews only for what the rules do not show), with the ratio of the two.

    .venv/bin/python bench/topology_preflight.py [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics
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
    from clusters.selectors import cluster_connection
    from sandbox.testing import SandboxCluster
    from topologies.preflight import spec_needs
    from topologies.presets import PRESETS, preset_spec
    from topologies.render import render
    from topologies.services import _denied_needs, spec_preflight
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
        least = Cluster(
            pk=2,
            name="bench-least",
            auth_method=AuthMethod.TOKEN,
            server=sandbox.server,
            token=shipped_rbac_token(sandbox),
            credential_version="bench-least",
        )
        cases = (
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
        )
        for label, data in cases:
            findings = spec_preflight(cluster=cluster, spec=data)
            codes = ",".join(f.code for f in findings) or "clean"
            admin = timed(lambda data=data: spec_preflight(cluster=cluster, spec=data), args.runs)
            report(f"{label} [{codes}] admin", admin)
            least_codes = ",".join(f.code for f in spec_preflight(cluster=least, spec=data)) or "clean"
            bound = timed(lambda data=data: spec_preflight(cluster=least, spec=data), args.runs)
            report(f"{label} [{least_codes}] rbac.yaml token", bound)
            parsed = TopologySpec.from_dict(data)
            conn = cluster_connection(least)
            asked = timed(lambda parsed=parsed, conn=conn: _denied_needs(conn, parsed), args.runs)
            report(f"  of which the permission check ({len(spec_needs(parsed))} needs)", asked)
            ratio = statistics.median(bound) / statistics.median(admin)
            share = statistics.median(asked) / statistics.median(bound)
            print(f"  {'':50} rbac.yaml token / admin = {ratio:.2f}×; permission check {share:.0%} of it")
    return 0


def shipped_rbac_token(sandbox: object) -> str:
    """A ServiceAccount bound to the ClusterRole of docker/k8s/rbac.yaml; its TokenRequest token."""
    import yaml

    docs = [d for d in yaml.safe_load_all((ROOT / "docker" / "k8s" / "rbac.yaml").read_text()) if d]
    kubectl = sandbox.kubectl  # type: ignore[attr-defined]
    for args in (("create", "namespace", "tandem"), ("create", "serviceaccount", "tandem", "-n", "tandem")):
        kubectl(*args)
    kubectl("apply", "-f", "-", input=yaml.safe_dump_all([d for d in docs if d["kind"] != "ServiceAccount"]))
    return str(sandbox.service_account_token("tandem", "tandem"))  # type: ignore[attr-defined]


if __name__ == "__main__":
    raise SystemExit(main())
