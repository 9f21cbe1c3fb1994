"""The register form: one of three ways to connect, every field explained."""

from __future__ import annotations

from typing import Any

from django import forms

from clusters.models import NAME_VALIDATOR

METHODS = [
    ("kubeconfig", "Upload a kubeconfig"),
    ("token", "API server URL + token"),
    ("in_cluster", "Tandem runs inside this cluster"),
]
MAX_KUBECONFIG_BYTES = 256 * 1024


class ClusterRegisterForm(forms.Form):
    name = forms.CharField(
        max_length=63,
        validators=[NAME_VALIDATOR],
        help_text="How Tandem names this cluster everywhere: lowercase letters, digits and dashes, "
        "e.g. prod-ascend-a.",
    )
    description = forms.CharField(
        max_length=500, required=False, help_text="Optional: what runs here, who owns it, where it is."
    )
    method = forms.ChoiceField(
        choices=METHODS, initial="kubeconfig", widget=forms.RadioSelect, label="How Tandem connects"
    )
    kubeconfig_file = forms.FileField(
        required=False,
        label="Kubeconfig file",
        help_text="The file kubectl uses (~/.kube/config). Exec plugins (aws, gcloud, kubelogin), "
        "auth providers and insecure-skip-tls-verify are refused: Tandem runs no plugins and always "
        "verifies TLS.",
    )
    kubeconfig = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false"}),
        label="…or paste it",
        help_text="Paste the kubeconfig here instead of uploading it.",
    )
    context = forms.CharField(
        required=False,
        max_length=253,
        help_text="Which context to use. Empty: the file's current-context. Tandem lists the contexts "
        "if the name is not in the file.",
    )
    server = forms.CharField(
        required=False,
        max_length=500,
        label="API server URL",
        widget=forms.URLInput(attrs={"placeholder": "https://10.0.0.1:6443"}),
        help_text="The address kubectl talks to. https:// is required; http:// only on loopback "
        "(127.0.0.1, a local development cluster).",
    )
    token = forms.CharField(
        required=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "off"}),
        label="Bearer token",
        help_text="A service account token: kubectl create serviceaccount tandem -n kube-system; "
        "kubectl create token tandem -n kube-system --duration=8760h. Stored encrypted, never shown again.",
    )
    ca_bundle = forms.CharField(
        required=False,
        label="CA bundle (PEM)",
        widget=forms.Textarea(
            attrs={"rows": 5, "spellcheck": "false", "placeholder": "-----BEGIN CERTIFICATE-----"}
        ),
        help_text="The certificate authority that signed the API server's certificate; required for "
        "https://. Tandem always verifies it.",
    )
    metrics_source = forms.ChoiceField(
        choices=[
            ("auto", "Recommend one (Tandem probes each source when saving)"),
            (
                "direct",
                "Direct: Tandem reaches pod IPs (it runs in the cluster, or the pod network is routed)",
            ),
            ("proxy", "API-server proxy: through pods/{name}:{port}/proxy (needs get on pods/proxy)"),
            ("prometheus", "Prometheus: the cluster's own, queried with PromQL"),
        ],
        initial="auto",
        required=False,  # not given: auto
        widget=forms.RadioSelect,
        label="Where live metrics come from",
    )
    prometheus_url = forms.CharField(
        required=False,
        max_length=500,
        label="Prometheus URL",
        widget=forms.URLInput(attrs={"placeholder": "https://prometheus.example:9090"}),
        help_text="The base URL of its HTTP API (Tandem queries /api/v1/query). Its pod series need the "
        "labels namespace and pod, as kube-prometheus' pod and service monitors give them.",
    )
    prometheus_token = forms.CharField(
        required=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "off"}),
        label="Prometheus bearer token",
        help_text="Optional; stored encrypted, never shown again.",
    )
    prometheus_username = forms.CharField(required=False, max_length=200, label="…or basic auth user")
    prometheus_password = forms.CharField(
        required=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "off"}),
        label="Basic auth password",
        help_text="Stored encrypted, never shown again.",
    )
    allow_unreachable = forms.BooleanField(
        required=False,
        label="Save even if the connection test fails",
        help_text="Useful before the network path exists; the cluster starts as unreachable and is "
        "re-checked every minute.",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        upload = data.get("kubeconfig_file")
        if upload is not None:
            if upload.size > MAX_KUBECONFIG_BYTES:
                self.add_error(
                    "kubeconfig_file", "the file is larger than 256 KiB; upload only the kubeconfig"
                )
            else:
                try:
                    data["kubeconfig"] = upload.read().decode("utf-8")
                except UnicodeDecodeError:
                    self.add_error("kubeconfig_file", "the file is not text; upload the kubeconfig YAML")
        method = data.get("method")
        if method == "kubeconfig" and not (data.get("kubeconfig") or "").strip():
            self.add_error("kubeconfig", "upload or paste a kubeconfig, or choose another way to connect")
        if method == "token":
            if not (data.get("server") or "").strip():
                self.add_error("server", "the API server URL is required, e.g. https://10.0.0.1:6443")
            if not (data.get("token") or "").strip():
                self.add_error(
                    "token", "the bearer token is required; the help below shows how to create one"
                )
        return data

    def service_kwargs(self) -> dict[str, Any]:
        data = self.cleaned_data
        method = data["method"]
        kwargs: dict[str, Any] = {
            "name": data["name"],
            "description": data.get("description", ""),
            "allow_unreachable": bool(data.get("allow_unreachable")),
            "metrics_source": data.get("metrics_source") or "auto",
            "prometheus_url": data.get("prometheus_url") or "",
            "prometheus_token": data.get("prometheus_token") or "",
            "prometheus_username": data.get("prometheus_username") or "",
            "prometheus_password": data.get("prometheus_password") or "",
        }
        if method == "kubeconfig":
            kwargs.update(kubeconfig=data.get("kubeconfig"), context=data.get("context") or None)
        elif method == "token":
            kwargs.update(server=data.get("server"), token=data.get("token"), ca_bundle=data.get("ca_bundle"))
        else:
            kwargs["in_cluster"] = True
        return kwargs

    # Service error fields → form fields.
    FIELD_MAP = {"auth_method": "method", "in_cluster": "method"}

    def add_service_errors(self, fields: dict[str, list[str]], message: str) -> None:
        if not fields:
            self.add_error(None, message)
        for field, messages in fields.items():
            target = self.FIELD_MAP.get(field, field)
            if self.data.get("method") == "kubeconfig" and target == "server":
                target = "kubeconfig"
            for text in messages:
                self.add_error(target if target in self.fields else None, text)


class ClusterDeleteForm(forms.Form):
    confirm = forms.BooleanField(
        required=False, label="Also remove the topologies listed above and their Kubernetes objects"
    )
