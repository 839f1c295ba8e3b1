"""Nested tags: `tag:project` also matches notes tagged `project/x` (Obsidian nests tags with '/').
The parents come from a generated column, so no writer of `tags` has to know about them."""

import django.contrib.postgres.fields
import django.contrib.postgres.indexes
from django.db import migrations, models

# Every tag and each of its parents: `project/x/y` -> project, project/x, project/x/y. Immutable
# and built from pg_catalog functions only, so a generated column and its index may use it.
TAGS_WITH_PARENTS = """
CREATE OR REPLACE FUNCTION pmd_tags_with_parents(tags varchar[]) RETURNS varchar[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT coalesce(array_agg(DISTINCT part ORDER BY part), '{}')::varchar[]
  FROM unnest(tags) AS t(tag),
       LATERAL generate_series(1, coalesce(array_length(string_to_array(t.tag, '/'), 1), 0)) AS n,
       LATERAL (SELECT array_to_string((string_to_array(t.tag, '/'))[1:n], '/') AS part) AS p
$$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("indexing", "0007_history"),
    ]

    operations = [
        migrations.RunSQL(TAGS_WITH_PARENTS, "DROP FUNCTION IF EXISTS pmd_tags_with_parents(varchar[])"),
        migrations.AddField(
            model_name="document",
            name="tags_with_parents",
            field=models.GeneratedField(
                db_persist=True,
                expression=models.Func(
                    models.F("tags"),
                    function="pmd_tags_with_parents",
                    output_field=django.contrib.postgres.fields.ArrayField(
                        base_field=models.CharField(max_length=200), size=None
                    ),
                ),
                output_field=django.contrib.postgres.fields.ArrayField(
                    base_field=models.CharField(max_length=200), size=None
                ),
            ),
        ),
        migrations.AddIndex(
            model_name="document",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["tags_with_parents"], name="document_tag_parents_gin"
            ),
        ),
    ]
