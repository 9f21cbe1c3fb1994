"""One name for the time between tokens: stored series ``*.itl_p50|p95|p99`` become ``*.tbt_*``, and
the latest snapshots' totals, roles and pods follow (a page opened right after the upgrade reads them)."""

from django.db import migrations, models
from django.db.models import Value
from django.db.models.functions import Replace

OLD_TO_NEW = {f"itl_{q}": f"tbt_{q}" for q in ("p50", "p95", "p99")}


def _renamed(data):
    if isinstance(data, dict):
        return {OLD_TO_NEW.get(k, k): _renamed(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_renamed(v) for v in data]
    return data


def forwards(apps, schema_editor):
    Series = apps.get_model("telemetry", "Series")
    LatestSnapshot = apps.get_model("telemetry", "LatestSnapshot")
    for old, new in OLD_TO_NEW.items():
        Series.objects.filter(name__endswith=f".{old}").update(name=Replace("name", Value(f".{old}"), Value(f".{new}")))
    for snap in LatestSnapshot.objects.all():
        snap.data = _renamed(snap.data)
        snap.save(update_fields=["data"])


def backwards(apps, schema_editor):
    Series = apps.get_model("telemetry", "Series")
    for old, new in OLD_TO_NEW.items():
        Series.objects.filter(name__endswith=f".{new}").update(name=Replace("name", Value(f".{new}"), Value(f".{old}")))


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0001_initial")]

    operations = [
        migrations.RunPython(forwards, backwards),
        migrations.AlterField(
            model_name="telemetryalert",
            name="metric",
            field=models.CharField(choices=[("ttft", "TTFT p95"), ("tbt", "TBT p95")], max_length=8),
        ),
    ]
