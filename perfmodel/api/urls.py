from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from perfmodel.api import views

urlpatterns: list[URLPattern | URLResolver] = [
    path(
        "topologies/<int:pk>/calibration/",
        views.TopologyCalibrationView.as_view(),
        name="topology-calibration",
    ),
]
