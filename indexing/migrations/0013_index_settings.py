"""The index's own configuration: one row a setting, read by every process."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("indexing", "0012_collection_title_from"),
    ]

    operations = [
        migrations.CreateModel(
            name="IndexSetting",
            fields=[
                ("name", models.CharField(max_length=64, primary_key=True, serialize=False)),
                ("value", models.TextField(blank=True, default="")),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
        ),
    ]
