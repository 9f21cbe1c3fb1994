from __future__ import annotations

from rest_framework.routers import DefaultRouter

from keys.api.views import ApiKeyViewSet

router = DefaultRouter(trailing_slash=True)
router.register("keys", ApiKeyViewSet, basename="key")
urlpatterns = router.urls
