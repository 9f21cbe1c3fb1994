from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from keys import views

app_name = "keys"
urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.keys_list, name="list"),
    path("new/", views.key_new, name="new"),
    path("policy/", views.key_policy, name="policy"),
    path("new/<slug:purpose>/", views.key_create, name="create"),
    path("<uuid:pk>/", views.key_detail, name="detail"),
    path("<uuid:pk>/rotate/", views.key_rotate, name="rotate"),
    path("<uuid:pk>/revoke/", views.key_revoke, name="revoke"),
]
