"""Path filters with a literal start (`path:meetings/**`) narrow through this index first."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("indexing", "0008_nested_tags"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="document",
            index=models.Index(fields=["path"], name="document_path_prefix", opclasses=["varchar_pattern_ops"]),
        ),
    ]
