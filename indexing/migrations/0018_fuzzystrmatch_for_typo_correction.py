"""Typo correction measures edit distances in the database: fuzzystrmatch's levenshtein.
A trusted extension shipped with PostgreSQL (and the embedded server): no superuser needed."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("indexing", "0017_converted_text_by_file_hash"),
    ]

    operations = [
        migrations.RunSQL("CREATE EXTENSION IF NOT EXISTS fuzzystrmatch", reverse_sql=migrations.RunSQL.noop),
    ]
