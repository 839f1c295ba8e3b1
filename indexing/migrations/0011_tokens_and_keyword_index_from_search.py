"""The API token and keyword index models move from the search app to indexing:
state only, their tables keep their names and rows."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0006_access"),
        ("indexing", "0010_job_worker_heartbeat"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="KeywordStats",
                    fields=[
                        ("collection_id", models.BigIntegerField(primary_key=True, serialize=False)),
                        ("n_passages", models.BigIntegerField()),
                        ("n_documents", models.BigIntegerField()),
                        ("total_length", models.BigIntegerField()),
                    ],
                    options={
                        "db_table": "search_keyword_stats",
                    },
                ),
                migrations.CreateModel(
                    name="KeywordTerm",
                    fields=[
                        (
                            "pk",
                            models.CompositePrimaryKey(
                                "lexeme", "collection_id", blank=True, editable=False, primary_key=True, serialize=False
                            ),
                        ),
                        ("lexeme", models.TextField()),
                        ("collection_id", models.BigIntegerField()),
                        ("df", models.IntegerField()),
                    ],
                    options={
                        "db_table": "search_keyword_term",
                    },
                ),
                migrations.CreateModel(
                    name="TokenFailure",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("address", models.CharField(max_length=64, unique=True)),
                        ("failures", models.PositiveIntegerField(default=0)),
                        (
                            "window_start",
                            models.DateTimeField(help_text="first failure of the current counting window"),
                        ),
                        ("blocked_until", models.DateTimeField(blank=True, null=True)),
                    ],
                    options={
                        "verbose_name": "API token failure",
                        "db_table": "search_tokenfailure",
                    },
                ),
                migrations.CreateModel(
                    name="ApiToken",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("name", models.CharField(blank=True, default="", max_length=100)),
                        (
                            "digest",
                            models.CharField(
                                editable=False, help_text="sha256 of the token", max_length=64, unique=True
                            ),
                        ),
                        (
                            "prefix",
                            models.CharField(
                                editable=False, help_text="first characters, to recognise a token", max_length=16
                            ),
                        ),
                        ("created", models.DateTimeField(auto_now_add=True)),
                        ("last_used", models.DateTimeField(blank=True, editable=False, null=True)),
                        ("revoked", models.DateTimeField(blank=True, null=True)),
                        (
                            "can_write",
                            models.BooleanField(
                                default=False, help_text="may change things its user may change; read-only otherwise"
                            ),
                        ),
                        (
                            "expires",
                            models.DateTimeField(
                                blank=True, help_text="refused after this time; empty: never", null=True
                            ),
                        ),
                        (
                            "collections",
                            models.ManyToManyField(
                                blank=True,
                                help_text="limited to these (of those its user may see); none: all of them",
                                related_name="+",
                                to="indexing.collection",
                            ),
                        ),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="api_tokens",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "verbose_name": "API token",
                        "db_table": "search_apitoken",
                        "ordering": ["-created"],
                    },
                ),
                migrations.CreateModel(
                    name="KeywordPassage",
                    fields=[
                        ("id", models.BigAutoField(primary_key=True, serialize=False)),
                        ("collection_id", models.BigIntegerField()),
                        ("ordinal", models.IntegerField()),
                        ("start_line", models.IntegerField()),
                        ("end_line", models.IntegerField()),
                        ("start_char", models.IntegerField()),
                        ("end_char", models.IntegerField()),
                        ("length", models.IntegerField()),
                        ("tsv", models.TextField()),
                        (
                            "document",
                            models.ForeignKey(
                                db_constraint=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="+",
                                to="indexing.document",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "search_keyword_passage",
                    },
                ),
                migrations.CreateModel(
                    name="KeywordPosting",
                    fields=[
                        (
                            "pk",
                            models.CompositePrimaryKey(
                                "passage_id", "lexeme", blank=True, editable=False, primary_key=True, serialize=False
                            ),
                        ),
                        ("lexeme", models.TextField()),
                        ("collection_id", models.BigIntegerField()),
                        ("document_id", models.BigIntegerField()),
                        ("tf_title", models.SmallIntegerField()),
                        ("tf_body", models.SmallIntegerField()),
                        ("length", models.IntegerField()),
                        (
                            "passage",
                            models.ForeignKey(
                                db_constraint=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="+",
                                to="indexing.keywordpassage",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "search_keyword_posting",
                    },
                ),
            ]
        ),
    ]
