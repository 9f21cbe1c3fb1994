from __future__ import annotations

from django.contrib import admin
from django.urls import URLPattern, URLResolver, include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from controlplane import views

api_v1: list[URLPattern | URLResolver] = [
    path("", include("accounts.api.urls")),
    path("", include("audit.api.urls")),
    path("", include("clusters.api.urls")),
    path("", include("topologies.api.urls")),
    path("", include("deployments.api.urls")),
    path("", include("telemetry.api.urls")),
    path("", include("perfmodel.api.urls")),
    path("", include("rebalancing.api.urls")),
    path("", include("whatif.api.urls")),
    path("", include("keys.api.urls")),
    path("", include("gateway.api.urls")),
    path("", include("slo.api.urls")),
    path("", include("workload.api.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api:schema"), name="docs"),
]

urlpatterns = [
    path("", views.overview, name="overview"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("accounts/", include("accounts.urls")),
    path("activity/", include("audit.urls")),
    path("clusters/", include("clusters.urls")),
    path("topologies/", include("topologies.urls")),
    path("deployments/", include("deployments.urls")),
    path("telemetry/", include("telemetry.urls")),
    path("rebalancing/", include("rebalancing.urls")),
    path("what-if/", include("whatif.urls")),
    path("keys/", include("keys.urls")),
    path("gateway/", include("gateway.urls")),
    path("traces/", include("traces.urls")),
    path("slo/", include("slo.urls")),
    path("api/v1/", include((api_v1, "api"), namespace="api")),
    path("admin/", admin.site.urls),
]

handler400 = "controlplane.views.bad_request"
handler404 = "controlplane.views.not_found"
handler500 = "controlplane.views.server_error"
