"""The API token and keyword index models move from the search app to indexing:
state only, their tables keep their names and rows."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("indexing", "0011_tokens_and_keyword_index_from_search"),
        ("search", "0006_access"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="apitoken",
                    name="collections",
                ),
                migrations.RemoveField(
                    model_name="apitoken",
                    name="user",
                ),
                migrations.RemoveField(
                    model_name="keywordpassage",
                    name="document",
                ),
                migrations.RemoveField(
                    model_name="keywordposting",
                    name="passage",
                ),
                migrations.DeleteModel(
                    name="KeywordStats",
                ),
                migrations.DeleteModel(
                    name="KeywordTerm",
                ),
                migrations.DeleteModel(
                    name="TokenFailure",
                ),
                migrations.DeleteModel(
                    name="ApiToken",
                ),
                migrations.DeleteModel(
                    name="KeywordPassage",
                ),
                migrations.DeleteModel(
                    name="KeywordPosting",
                ),
            ]
        ),
    ]
