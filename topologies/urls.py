from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from topologies import adopt_views, delete_views, import_views, views

app_name = "topologies"
urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.topologies_list, name="list"),
    path("new/", views.topology_new, name="new"),
    path("import/", import_views.topology_import, name="import"),
    path("adopt/", adopt_views.topology_adopt, name="adopt"),
    path("<int:pk>/release/", adopt_views.topology_release, name="release"),
    path("preflight/", views.editor_preflight, name="editor-preflight"),
    path("<int:pk>/", views.topology_detail, name="detail"),
    path("<int:pk>/edit/", views.topology_edit, name="edit"),
    path("<int:pk>/preflight/", views.detail_preflight, name="preflight"),
    path("<int:pk>/delete/", delete_views.topology_delete, name="delete"),
    path("removal/<int:job>/", delete_views.topology_removal, name="removal"),
]
