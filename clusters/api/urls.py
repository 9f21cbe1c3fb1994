from __future__ import annotations

from rest_framework.routers import DefaultRouter

from clusters.api.views import ClusterViewSet

router = DefaultRouter(trailing_slash=True)
router.register("clusters", ClusterViewSet, basename="cluster")
urlpatterns = router.urls
