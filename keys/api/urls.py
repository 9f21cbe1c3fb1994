from __future__ import annotations

from django.urls import URLPattern, URLResolver, path
from rest_framework.routers import DefaultRouter

from keys.api.policy import KeyPolicyView
from keys.api.views import ApiKeyViewSet

router = DefaultRouter(trailing_slash=True)
router.register("keys", ApiKeyViewSet, basename="key")
urlpatterns: list[URLPattern | URLResolver] = [
    path("key-policy/", KeyPolicyView.as_view(), name="key-policy"),
    *router.urls,
]
