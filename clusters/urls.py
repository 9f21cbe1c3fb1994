from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from clusters import views

app_name = "clusters"
urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.clusters_list, name="list"),
    path("register/", views.cluster_register, name="register"),
    path("<int:pk>/", views.cluster_detail, name="detail"),
    path("<int:pk>/check/", views.cluster_check, name="check"),
    path("<int:pk>/test-connection/", views.cluster_test_connection, name="test_connection"),
    path("<int:pk>/remove/", views.cluster_delete, name="delete"),
]
