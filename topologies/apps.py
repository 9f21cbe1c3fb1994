from django.apps import AppConfig


class TopologiesConfig(AppConfig):
    name = "topologies"
