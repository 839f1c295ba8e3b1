import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("indexing", "0018_fuzzystrmatch_for_typo_correction"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="SearchLogEntry",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("at", models.DateTimeField(auto_now_add=True, db_index=True)),
                ("face", models.CharField(max_length=10)),
                ("mode", models.CharField(max_length=10)),
                ("query", models.CharField(max_length=2000)),
                ("results", models.IntegerField()),
                ("top_score", models.FloatField(blank=True, null=True)),
                ("latency_ms", models.FloatField()),
                ("corrected_query", models.CharField(blank=True, default="", max_length=2000)),
                ("opened_uri", models.CharField(blank=True, default="", max_length=4200)),
                (
                    "token",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="indexing.apitoken",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={"ordering": ["-at", "-id"]},
        ),
    ]
