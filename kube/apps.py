from django.apps import AppConfig


class KubeConfig(AppConfig):
    name = "kube"
