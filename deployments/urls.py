from __future__ import annotations

from django.urls import URLPattern, path

from deployments import rollback_views, views

app_name = "deployments"
urlpatterns: list[URLPattern] = [
    path("topology/<int:pk>/deploy/", views.topology_deploy, name="deploy"),
    path("topology/<int:pk>/rollback/", rollback_views.topology_rollback, name="rollback"),
    path("topology/<int:pk>/rollback/confirm/", rollback_views.rollback_confirm, name="rollback_confirm"),
    path("topology/<int:pk>/keep-running/", rollback_views.keep_running, name="keep_running"),
    path("topology/<int:pk>/scale/", views.topology_scale, name="scale"),
    path("topology/<int:pk>/reapply/", views.topology_reapply, name="reapply"),
    path("topology/<int:pk>/deploy-policy/", views.topology_deploy_policy, name="deploy_policy"),
    path("topology/<int:pk>/panel/", views.topology_panel, name="panel"),
    path("<int:pk>/cancel/", views.deployment_cancel, name="cancel"),
]
