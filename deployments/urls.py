from __future__ import annotations

from django.urls import URLPattern, path

from deployments import views

app_name = "deployments"
urlpatterns: list[URLPattern] = [
    path("topology/<int:pk>/deploy/", views.topology_deploy, name="deploy"),
    path("topology/<int:pk>/rollback/", views.topology_rollback, name="rollback"),
    path("topology/<int:pk>/scale/", views.topology_scale, name="scale"),
    path("topology/<int:pk>/reapply/", views.topology_reapply, name="reapply"),
    path("topology/<int:pk>/deploy-policy/", views.topology_deploy_policy, name="deploy_policy"),
    path("topology/<int:pk>/panel/", views.topology_panel, name="panel"),
    path("<int:pk>/cancel/", views.deployment_cancel, name="cancel"),
]
