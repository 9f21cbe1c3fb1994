from typing import Any

from django.db import migrations, models

# The chart query also reads `stream` (TTFT is over streamed answers) and `probe` (verification
# traffic charted apart): both join the columns the window indexes carry, so it stays index-only.
OLD_COVERED = "backend, status, ttft_ms, latency_ms"
COVERED = "backend, status, stream, probe, ttft_ms, latency_ms"
WINDOW_INDEXES = (
    ("gateway_gat_topolog_8c71bc_idx", "topology_id, created DESC"),
    ("gateway_gat_key_id_a8fcdb_idx", "key_id, created"),
)


def _rebuild(schema_editor: Any, covered: str) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, columns in WINDOW_INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")
        schema_editor.execute(
            f"CREATE INDEX {name} ON gateway_gatewayrequest ({columns}) INCLUDE ({covered})"
        )


def cover(apps: Any, schema_editor: Any) -> None:
    _rebuild(schema_editor, COVERED)


def uncover(apps: Any, schema_editor: Any) -> None:
    _rebuild(schema_editor, OLD_COVERED)


class Migration(migrations.Migration):
    dependencies = [("gateway", "0003_discovered_endpoint_stale")]

    operations = [
        migrations.AddField(
            model_name="gatewayrequest", name="probe", field=models.BooleanField(default=False)
        ),
        migrations.RunPython(cover, uncover),
    ]
