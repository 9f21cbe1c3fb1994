from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("gateway", "0005_request_trace_id"),
    ]

    operations = [
        migrations.AddField(
            model_name="gatewayrequest",
            name="prefix_group",
            field=models.CharField(blank=True, default="", max_length=16),
        ),
    ]
