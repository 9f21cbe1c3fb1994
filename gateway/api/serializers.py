from __future__ import annotations

from typing import Any

from rest_framework import serializers

from gateway.models import BreakerEvent, GatewayRequest, ProbeRun, Route


class RouteSerializer(serializers.ModelSerializer[Route]):
    """A topology's gateway settings. The fallback key is write-only: reads say only whether one is set."""

    aliases = serializers.ListField(
        child=serializers.CharField(max_length=256),
        max_length=20,
        required=False,
        help_text="Other model names clients may use for this topology.",
    )
    fallback_api_key = serializers.CharField(
        write_only=True, required=False, allow_blank=True, max_length=4096
    )
    fallback_key_set = serializers.SerializerMethodField()
    aliases = serializers.ListField(
        child=serializers.CharField(max_length=256, allow_blank=True),
        max_length=20,
        required=False,
        help_text="Other model names the gateway routes to this topology (at most 20).",
    )
    serving_endpoint = serializers.SerializerMethodField(
        help_text="What the gateway uses: entered, or discovered."
    )

    class Meta:
        model = Route
        fields = [
            "aliases",
            "endpoint_url",
            "discovered_url",
            "serving_endpoint",
            "fallback_base_url",
            "fallback_api_key",
            "fallback_key_set",
            "fallback_model",
            "fallback_on_429",
            "timeout_seconds",
            "breaker_failures",
            "breaker_open_seconds",
            "updated",
        ]
        read_only_fields = ["discovered_url", "updated"]
        extra_kwargs: dict[str, Any] = {
            "timeout_seconds": {"min_value": 1, "max_value": 3600},
            "breaker_failures": {"min_value": 1, "max_value": 100},
            "breaker_open_seconds": {"min_value": 1, "max_value": 3600},
        }

    def get_fallback_key_set(self, route: Route) -> bool:
        return bool(route.fallback_api_key)

    def get_serving_endpoint(self, route: Route) -> str:
        return route.endpoint_url or route.discovered_url


class GatewayRequestSerializer(serializers.ModelSerializer[GatewayRequest]):
    class Meta:
        model = GatewayRequest
        fields = [
            "created",
            "key_id",
            "model",
            "endpoint",
            "backend",
            "status",
            "error_code",
            "stream",
            "prompt_tokens",
            "completion_tokens",
            "ttft_ms",
            "latency_ms",
        ]


class BreakerEventSerializer(serializers.ModelSerializer[BreakerEvent]):
    class Meta:
        model = BreakerEvent
        fields = ["created", "state", "reason"]


class ProbeResultSerializer(serializers.Serializer[dict[str, Any]]):
    name = serializers.CharField()
    passed = serializers.BooleanField()
    summary = serializers.CharField()
    figures = serializers.DictField()
    diagnosis = serializers.ListField(child=serializers.CharField())


class ProbeRunSerializer(serializers.ModelSerializer[ProbeRun]):
    results = ProbeResultSerializer(many=True, read_only=True)
    requested_by = serializers.CharField(source="requested_by.username", default="", read_only=True)

    class Meta:
        model = ProbeRun
        fields = [
            "id",
            "topology",
            "kinds",
            "params",
            "state",
            "results",
            "error",
            "requested_by",
            "created",
            "started",
            "finished",
        ]
        read_only_fields = fields


class VerifyRequestSerializer(serializers.Serializer[dict[str, Any]]):
    kinds = serializers.ListField(
        child=serializers.ChoiceField(choices=["smoke", "prefix", "concurrency", "links", "fallback"]),
        required=False,
        max_length=5,
        help_text="Default: all of them.",
    )
    params = serializers.DictField(
        required=False,
        help_text="prefix_words, prefix_requests, prefix_margin, concurrency_clients, concurrency_seconds",
    )
