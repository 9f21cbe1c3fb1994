from __future__ import annotations

from django.urls import URLPattern, URLResolver, path
from rest_framework.routers import DefaultRouter

from slo.api import views

router = DefaultRouter(trailing_slash=True)
router.register("slos", views.SloViewSet, basename="slo")
router.register("slo-alerts", views.SloAlertViewSet, basename="slo-alert")
router.register("notification-targets", views.TargetViewSet, basename="notification-target")
router.register("notification-deliveries", views.DeliveryViewSet, basename="notification-delivery")

urlpatterns: list[URLPattern | URLResolver] = [
    path("topologies/<int:pk>/slos/", views.TopologySloList.as_view(), name="topology-slos"),
    path(
        "topologies/<int:pk>/slos/defaults/",
        views.TopologySloDefaults.as_view(),
        name="topology-slos-defaults",
    ),
    *router.urls,
]
