from __future__ import annotations

from django.urls import path

from gateway.api import views

urlpatterns = [
    path("topologies/<int:pk>/gateway/", views.TopologyGatewayRoute.as_view(), name="topology-gateway"),
    path(
        "topologies/<int:pk>/gateway/requests/",
        views.TopologyGatewayRequests.as_view(),
        name="topology-gateway-requests",
    ),
    path(
        "topologies/<int:pk>/gateway/breaker/",
        views.TopologyBreakerEvents.as_view(),
        name="topology-gateway-breaker",
    ),
    path(
        "topologies/<int:pk>/gateway-series/",
        views.TopologyGatewaySeries.as_view(),
        name="topology-gateway-series",
    ),
    path("keys/<str:pk>/gateway-series/", views.KeyGatewaySeries.as_view(), name="key-gateway-series"),
    path("topologies/<int:pk>/verify/", views.TopologyVerify.as_view(), name="topology-verify"),
    path("probe-runs/<int:pk>/", views.ProbeRunDetail.as_view(), name="probe-run"),
]
