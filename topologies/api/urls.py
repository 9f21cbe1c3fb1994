from __future__ import annotations

from django.urls import URLPattern, URLResolver, path
from rest_framework.routers import DefaultRouter

from topologies.api import views

router = DefaultRouter(trailing_slash=True)
router.register("topologies", views.TopologyViewSet, basename="topology")

urlpatterns: list[URLPattern | URLResolver] = [
    path("topologies/<int:pk>/revisions/", views.RevisionList.as_view(), name="topology-revisions"),
    path("topologies/<int:pk>/revisions/diff/", views.RevisionDiff.as_view(), name="topology-revision-diff"),
    path(
        "topologies/<int:pk>/revisions/<int:number>/",
        views.RevisionDetail.as_view(),
        name="topology-revision-detail",
    ),
    path(
        "topologies/<int:pk>/revisions/<int:number>/manifests.yaml",
        views.RevisionManifestsExport.as_view(),
        name="topology-revision-manifests-yaml",
    ),
    path(
        "topologies/<int:pk>/revisions/<int:number>/spec.yaml",
        views.RevisionSpecExport.as_view(),
        name="topology-revision-spec-yaml",
    ),
    *router.urls,
]
