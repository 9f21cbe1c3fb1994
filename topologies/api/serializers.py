"""Topology API shapes. Specs are validated by ``TopologySpec.from_dict``, the same code as the editor."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from clusters.models import Cluster
from controlplane.api.fields import AsciiIntegerField
from topologies.models import Revision, Topology
from topologies.spec import SpecError, TopologySpec

SPEC_REQUIRED = (
    "is required: the whole topology spec (GET /api/v1/topologies/<id>/, change its spec, send it back)"
)


CLUSTER_ERRORS: dict[str, Any] = {
    "does_not_exist": "cluster {pk_value} does not exist; use an id from /api/v1/clusters/",
    "required": "is required: the id of a registered cluster (see /api/v1/clusters/)",
    "incorrect_type": "must be a cluster id (a number from /api/v1/clusters/)",
}


@extend_schema_field({"$ref": "#/components/schemas/TopologySpec"})
class SpecField(serializers.JSONField):
    """A topology spec as sent: the schema is the spec parser's own (topologies.spec_schema)."""


@extend_schema_field({"$ref": "#/components/schemas/StoredTopologySpec"})
class StoredSpecField(serializers.JSONField):
    """A topology spec as stored: every field present, defaults filled in."""


def validated_spec(value: Any) -> TopologySpec:
    """Parse a spec or raise a DRF error whose fields are paths inside ``spec`` (spec.roles.prefill...)."""
    try:
        return TopologySpec.from_dict(value)
    except SpecError as error:
        raise serializers.ValidationError(error.errors) from None


class TopologySerializer(serializers.ModelSerializer[Topology]):
    cluster_name = serializers.CharField(source="cluster.name", read_only=True)
    current_revision = serializers.IntegerField(
        source="current_revision.number", read_only=True, default=None, allow_null=True
    )
    deployed_revision = serializers.IntegerField(
        source="deployed_revision.number",
        read_only=True,
        default=None,
        allow_null=True,
        help_text="The revision running on the cluster; null when never deployed.",
    )
    created_by = serializers.CharField(
        source="created_by.username", read_only=True, default=None, allow_null=True
    )
    spec = StoredSpecField(read_only=True)
    slo_ttft_ms = serializers.SerializerMethodField(help_text="p95 TTFT target in ms; null: not set yet")
    slo_tbt_ms = serializers.SerializerMethodField(help_text="p95 TBT target in ms; null: not set yet")

    class Meta:
        model = Topology
        fields = [
            "id",
            "name",
            "cluster",
            "cluster_name",
            "namespace",
            "model_name",
            "engine",
            "image",
            "backend",
            "kv_connector",
            "slo_ttft_ms",
            "slo_tbt_ms",
            "current_revision",
            "deployed_revision",
            "drift_state",
            "drift_detail",
            "spec",
            "created",
            "updated",
            "created_by",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_slo_ttft_ms(self, topology: Topology) -> int | None:
        return topology.slo_ttft_ms or None  # 0 is stored for "not set" (an import asks for it)

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_slo_tbt_ms(self, topology: Topology) -> int | None:
        return topology.slo_tbt_ms or None


class TopologyCreateSerializer(serializers.Serializer[Any]):
    cluster = serializers.PrimaryKeyRelatedField(
        queryset=Cluster.objects.all(),
        error_messages=CLUSTER_ERRORS,
    )
    spec = SpecField(
        help_text="The topology spec: name, namespace, engine, connector, roles, ...",
        error_messages={"required": SPEC_REQUIRED},
    )
    message = serializers.CharField(required=False, allow_blank=True, max_length=500)

    def validate_spec(self, value: Any) -> TopologySpec:
        return validated_spec(value)


class TopologyUpdateSerializer(serializers.Serializer[Any]):
    spec = SpecField(
        help_text="The whole new spec; an unchanged spec creates no revision.",
        error_messages={"required": SPEC_REQUIRED},
    )
    message = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=500,
        help_text="Why it changed; shown in the revision list.",
    )

    def validate_spec(self, value: Any) -> TopologySpec:
        return validated_spec(value)


class PreflightSpecSerializer(serializers.Serializer[Any]):
    spec = SpecField(error_messages={"required": SPEC_REQUIRED})
    cluster = serializers.PrimaryKeyRelatedField(
        queryset=Cluster.objects.all(),
        error_messages=CLUSTER_ERRORS,
    )

    def validate_spec(self, value: Any) -> TopologySpec:
        return validated_spec(value)


class PreflightRevisionSerializer(serializers.Serializer[Any]):
    revision = AsciiIntegerField(
        required=False, min_value=1, help_text="Revision number to check; default the current one."
    )


class FindingSerializer(serializers.Serializer[Any]):
    level = serializers.ChoiceField(choices=["error", "warning"])
    code = serializers.CharField()
    field = serializers.CharField()
    message = serializers.CharField()
    fix = serializers.CharField()


class PreflightResultSerializer(serializers.Serializer[Any]):
    ok = serializers.BooleanField(help_text="True when no finding blocks a deploy.")
    error_count = serializers.IntegerField()
    warning_count = serializers.IntegerField()
    findings = FindingSerializer(many=True)


class RevisionListSerializer(serializers.ModelSerializer[Revision]):
    created_by = serializers.CharField(
        source="created_by.username", read_only=True, default=None, allow_null=True
    )

    class Meta:
        model = Revision
        fields = ["number", "message", "created", "created_by"]
        read_only_fields = fields


class RevisionSerializer(RevisionListSerializer):
    spec = StoredSpecField(read_only=True)

    class Meta(RevisionListSerializer.Meta):
        fields = [*RevisionListSerializer.Meta.fields, "spec", "manifests"]
        read_only_fields = fields


class DiffQuerySerializer(serializers.Serializer[Any]):
    from_ = AsciiIntegerField(
        min_value=1,
        help_text="Older revision number.",
        error_messages={
            "required": "is required: the revision to diff from, e.g. ?from=1&to=2",
            "invalid": "must be a revision number, e.g. ?from=1&to=2",
            "null": "is required: the revision to diff from, e.g. ?from=1&to=2",
        },
    )
    to = AsciiIntegerField(
        min_value=1,
        help_text="Newer revision number.",
        error_messages={
            "required": "is required: the revision to diff to, e.g. ?from=1&to=2",
            "invalid": "must be a revision number, e.g. ?from=1&to=2",
            "null": "is required: the revision to diff to, e.g. ?from=1&to=2",
        },
    )

    def to_internal_value(self, data: Any) -> Any:
        data = {"from_": data.get("from"), "to": data.get("to")}
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError as error:
            detail = error.detail
            if isinstance(detail, dict) and "from_" in detail:
                detail["from"] = detail.pop("from_")
            raise serializers.ValidationError(detail) from None


class DeleteJobSerializer(serializers.Serializer[Any]):
    deployment = serializers.IntegerField(help_text="The delete job's id.")
    state = serializers.CharField()
    url = serializers.CharField(help_text="Where to follow it: /api/v1/deployments/{id}/")


class DiffSerializer(serializers.Serializer[Any]):
    topology = serializers.IntegerField()
    from_revision = serializers.IntegerField()
    to_revision = serializers.IntegerField()
    diff = serializers.CharField(help_text="Unified diff of the rendered manifests as YAML (empty if equal).")


IMPORT_YAML_HELP = (
    "Kthena ModelServing (with its ModelServer and ModelRoute), or prefill and decode Deployments with "
    "their Services: one or several YAML documents"
)


class ImportRequestSerializer(serializers.Serializer[Any]):
    yaml = serializers.CharField(
        help_text=IMPORT_YAML_HELP,
        trim_whitespace=False,
        max_length=1_000_000,
        error_messages={
            "required": "is required: the YAML text to import",
            "blank": "is empty; paste the YAML",
        },
    )
    cluster = serializers.PrimaryKeyRelatedField(
        queryset=Cluster.objects.all(),
        required=False,
        error_messages=CLUSTER_ERRORS,
        help_text="Required to save; with a preview, the accelerator resources are checked against its nodes",
    )
    overrides = serializers.DictField(
        required=False,
        help_text="Top-level spec fields that replace or fill in what the YAML gives (e.g. connector, slo)",
    )
    preview = serializers.BooleanField(
        default=True,
        help_text="true: only show what the import gives; false: create the topology (needs cluster)",
    )
    message = serializers.CharField(required=False, allow_blank=True, max_length=500)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs.get("preview", True) and "cluster" not in attrs:
            raise serializers.ValidationError(
                {"cluster": ["is required to save: the id of a registered cluster"]}
            )
        return attrs


class ImportNoteSerializer(serializers.Serializer[Any]):
    kind = serializers.ChoiceField(choices=["mapped", "verbatim", "unsupported", "changed", "questions"])
    source = serializers.CharField(  # type: ignore[assignment]
        help_text="Where in the YAML (a changed note: the path of the field; a question: empty)"
    )
    target = serializers.CharField(
        help_text="The spec field it went to (empty: rendered by Tandem); a question: the field to answer"
    )
    message = serializers.CharField()


class ImportVerdictSerializer(serializers.Serializer[Any]):
    lossless = serializers.BooleanField(help_text="true: the render reproduces the YAML, nothing dropped")
    changed = serializers.IntegerField(help_text="Fields of the YAML the render writes differently")
    dropped = serializers.IntegerField(help_text="Parts of the YAML that cannot be represented")
    questions = serializers.IntegerField(help_text="Spec fields left unset that the operator must answer")


class ImportReportSerializer(serializers.Serializer[Any]):
    mapped = ImportNoteSerializer(many=True)
    verbatim = ImportNoteSerializer(many=True)
    unsupported = ImportNoteSerializer(many=True)
    changed = ImportNoteSerializer(
        many=True, help_text="Each field the render of the imported spec writes differently (path: was → is)"
    )
    questions = ImportNoteSerializer(
        many=True, help_text="Values the YAML cannot say (SLO targets, rebalancing bounds): left unset"
    )


class ImportPreviewSerializer(serializers.Serializer[Any]):
    ok = serializers.BooleanField()
    source = serializers.CharField(  # type: ignore[assignment]
        help_text="kthena, deployments, or empty when nothing was recognised"
    )
    spec = serializers.JSONField(help_text="The spec the YAML gives (with defaults when ok)")
    report = ImportReportSerializer()
    verdict = ImportVerdictSerializer()
    findings = FindingSerializer(
        many=True,
        help_text="With a cluster: what its nodes cannot give the spec (an accelerator resource no node "
        "offers, a node selector no node matches); empty without one",
    )
    errors = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField())
    )


class ImportCreatedSerializer(serializers.Serializer[Any]):
    topology = TopologySerializer()
    report = ImportReportSerializer()


class AdoptableQuerySerializer(serializers.Serializer[Any]):
    cluster = serializers.PrimaryKeyRelatedField(
        queryset=Cluster.objects.all(),
        required=False,
        error_messages=CLUSTER_ERRORS,
        help_text="One cluster; without it, every registered cluster",
    )


class AdoptRequestSerializer(serializers.Serializer[Any]):
    cluster = serializers.PrimaryKeyRelatedField(
        queryset=Cluster.objects.all(), error_messages=CLUSTER_ERRORS
    )
    kind = serializers.ChoiceField(
        choices=["ModelServing", "Deployment"],
        error_messages={"invalid_choice": "must be ModelServing or Deployment (see the adoptable list)"},
    )
    namespace = serializers.RegexField(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)
    name = serializers.RegexField(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", max_length=253)
    overrides = serializers.DictField(
        required=False, help_text="Spec fields that fill in what the objects lack"
    )


class AdoptableSerializer(serializers.Serializer[Any]):
    cluster = serializers.IntegerField()
    kind = serializers.CharField(
        help_text="ModelServing or Deployment; empty when the cluster could not be read"
    )
    namespace = serializers.CharField()
    name = serializers.CharField()
    objects = serializers.ListField(child=serializers.CharField())
    ok = serializers.BooleanField()
    errors = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField())
    )
    spec = serializers.JSONField()
    report = ImportReportSerializer()


class ReleasedSerializer(serializers.Serializer[Any]):
    released = serializers.ListField(child=serializers.CharField(), help_text="Objects handed back")
