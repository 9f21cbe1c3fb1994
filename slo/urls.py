from __future__ import annotations

from django.urls import path

from slo import views

app_name = "slo"

urlpatterns = [
    path("topologies/<int:pk>/defaults/", views.slo_defaults, name="defaults"),
    path("topologies/<int:pk>/targets/", views.target_add, name="target-add"),
    path("topologies/<int:pk>/targets/<int:target_id>/test/", views.target_test, name="target-test"),
    path("slos/<int:slo_id>/edit/", views.slo_edit, name="edit"),
    path("slos/<int:slo_id>/silence/", views.slo_silence, name="silence"),
    path("slos/<int:slo_id>/unsilence/", views.slo_unsilence, name="unsilence"),
    path("alerts/<int:alert_id>/acknowledge/", views.alert_acknowledge, name="acknowledge"),
]
