"""Titles from the file name for Obsidian vaults, and how each collection's notes were
read: existing collections get an empty `reading`, so their next scan reads every note again and
corrects titles and tags; a collection whose folder holds .obsidian/ takes its titles from file names."""

import os

from django.db import migrations, models


def obsidian_vaults_title_by_filename(apps, schema_editor):
    Collection = apps.get_model("indexing", "Collection")
    for collection in Collection.objects.all():
        try:
            vault = os.path.isdir(os.path.join(collection.root_path, ".obsidian"))
        except OSError:
            vault = False
        if vault:
            collection.title_from = "filename"
            collection.save(update_fields=["title_from"])


class Migration(migrations.Migration):
    dependencies = [
        ("indexing", "0011_tokens_and_keyword_index_from_search"),
    ]

    operations = [
        migrations.AddField(
            model_name="collection",
            name="reading",
            field=models.CharField(blank=True, default="", max_length=40),
        ),
        migrations.AddField(
            model_name="collection",
            name="title_from",
            field=models.CharField(
                choices=[
                    ("heading", "frontmatter title, else the first level-1 heading, else the file name"),
                    ("filename", "the file name (Obsidian's convention)"),
                ],
                default="heading",
                max_length=10,
                help_text="where notes' titles come from; 'filename' is chosen for a folder holding .obsidian/",
            ),
        ),
        migrations.RunPython(obsidian_vaults_title_by_filename, migrations.RunPython.noop),
    ]
