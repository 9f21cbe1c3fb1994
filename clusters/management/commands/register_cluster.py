"""Register (or refresh) a cluster from a kubeconfig file; idempotent, for scripts and the standalone demo."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from clusters.models import Cluster
from clusters.services import cluster_register, cluster_update
from controlplane.api.errors import DomainError
from kube.kubeconfig import KubeconfigError, credentials_from_kubeconfig


class Command(BaseCommand):
    help = (
        "Register a cluster from a kubeconfig. Running it again with the same name updates the stored "
        "credentials only when the server or credentials changed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True, help="Cluster name in Tandem, e.g. sandbox")
        parser.add_argument("--kubeconfig", required=True, help="Path to the kubeconfig file")
        parser.add_argument("--context", default=None, help="Context to use (default: current-context)")
        parser.add_argument("--description", default="", help="Shown on the clusters page")
        parser.add_argument(
            "--allow-unreachable", action="store_true", help="Save even if the connection test fails"
        )
        parser.add_argument(
            "--metrics-source",
            default="auto",
            choices=["auto", "direct", "proxy", "prometheus"],
            help="Where live metrics come from (default auto: the source the registration probe recommends)",
        )
        parser.add_argument(
            "--prometheus-url", default="", help="Prometheus base URL (with --metrics-source prometheus)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["kubeconfig"])
        if not path.is_file():
            raise CommandError(f"--kubeconfig {path}: no such file")
        text = path.read_text()
        try:
            wanted = credentials_from_kubeconfig(text, options["context"])
        except KubeconfigError as exc:
            raise CommandError(f"{path}: {exc.message}") from None
        name = options["name"]
        existing = Cluster.objects.filter(name=name).first()
        try:
            if existing is None:
                cluster = cluster_register(
                    name=name,
                    kubeconfig=text,
                    context=options["context"],
                    description=options["description"],
                    allow_unreachable=options["allow_unreachable"],
                    metrics_source=options["metrics_source"],
                    prometheus_url=options["prometheus_url"],
                )
                self.stdout.write(self.style.SUCCESS(f"registered cluster {cluster.name} ({cluster.server})"))
                return
            same = (
                existing.server == wanted.server
                and existing.token == (wanted.token or "")
                and existing.client_cert == (wanted.client_cert or "")
                and existing.ca_bundle.strip() == (wanted.ca_data or "").strip()
            )
            if same:
                self.stdout.write(f"cluster {name} is already registered with these credentials")
                return
            cluster_update(
                cluster=existing,
                kubeconfig=text,
                context=options["context"],
                allow_unreachable=options["allow_unreachable"],
            )
            self.stdout.write(
                self.style.SUCCESS(f"updated the credentials of cluster {name} ({wanted.server})")
            )
        except DomainError as exc:
            raise CommandError(exc.message) from None
