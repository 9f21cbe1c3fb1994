from __future__ import annotations

from django.urls import URLPattern, path

from deployments.api import views

urlpatterns: list[URLPattern] = [
    path("topologies/<int:pk>/deploy/", views.TopologyDeploy.as_view(), name="topology-deploy"),
    path("topologies/<int:pk>/rollback/", views.TopologyRollback.as_view(), name="topology-rollback"),
    path(
        "topologies/<int:pk>/keep-running/", views.TopologyKeepRunning.as_view(), name="topology-keep-running"
    ),
    path("topologies/<int:pk>/model-name/", views.TopologyModelName.as_view(), name="topology-model-name"),
    path("topologies/<int:pk>/scale/", views.TopologyScale.as_view(), name="topology-scale"),
    path("topologies/<int:pk>/reapply/", views.TopologyReapply.as_view(), name="topology-reapply"),
    path(
        "topologies/<int:pk>/deploy-policy/",
        views.TopologyDeployPolicy.as_view(),
        name="topology-deploy-policy",
    ),
    path("deployments/", views.DeploymentList.as_view(), name="deployment-list"),
    path("deployments/<int:pk>/", views.DeploymentDetail.as_view(), name="deployment-detail"),
    path("deployments/<int:pk>/cancel/", views.DeploymentCancel.as_view(), name="deployment-cancel"),
]
