"""Create the demo P/D topology on a registered cluster and deploy it (idempotent).

    manage.py deploy_demo --cluster sandbox [--preset deepseek-ascend-mooncake] [--wait 180]

A topology that is already deployed is left alone; one that is being deployed is waited for.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from deployments.models import ACTIVE_STATES, FINAL_STATES, Deployment, State


class Command(BaseCommand):
    help = "Create and deploy the demo prefill/decode topology on a registered cluster."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", default="sandbox", help="registered cluster name (default sandbox)")
        parser.add_argument("--preset", default="deepseek-ascend-mooncake", help="seed preset key")
        parser.add_argument("--wait", type=float, default=0, help="seconds to wait for the deploy to finish")

    def handle(self, *args: Any, **options: Any) -> None:
        from clusters.models import Cluster
        from deployments.services import deployment_start
        from topologies.models import Topology
        from topologies.presets import PRESETS, preset_spec
        from topologies.services import topology_create

        cluster = Cluster.objects.filter(name=options["cluster"]).first()
        if cluster is None:
            raise CommandError(
                f"no cluster named {options['cluster']!r}; register it first (manage.py register_cluster)"
            )
        if options["preset"] not in PRESETS:
            raise CommandError(f"unknown preset {options['preset']!r}; use one of {', '.join(PRESETS)}")
        spec = preset_spec(options["preset"])
        topology = Topology.objects.filter(cluster=cluster, name=spec["name"]).first()
        if topology is None:
            topology = topology_create(cluster=cluster, spec=spec, actor=None, message="demo topology")
        running = topology.deployed_revision
        if running is not None and running.pk == topology.current_revision_id:
            self.stdout.write(f"demo topology {topology.name} already running revision {running.number}")
            return
        deployment = Deployment.objects.filter(topology=topology, state__in=ACTIVE_STATES).first()
        if deployment is None:
            deployment = deployment_start(topology=topology, actor=None, source_ip=None)
        if not options["wait"]:
            self.stdout.write(f"demo topology {topology.name}: deployment #{deployment.pk} queued")
            return
        deadline = time.monotonic() + options["wait"]
        while time.monotonic() < deadline:
            deployment.refresh_from_db()
            if deployment.state in FINAL_STATES:
                break
            time.sleep(0.5)
        if deployment.state == State.SUCCEEDED:
            self.stdout.write(
                f"demo topology {topology.name} deployed: revision {deployment.revision_number}, "
                f"{deployment.pods_ready}/{deployment.pods_total} pods Ready"
            )
        elif deployment.state in FINAL_STATES:
            raise CommandError(
                f"demo deploy #{deployment.pk} {deployment.get_state_display().lower()}: {deployment.error}"
            )
        else:
            self.stdout.write(
                f"demo topology {topology.name}: deployment #{deployment.pk} still {deployment.state}"
            )
