"""An index embedded before it kept its own configuration keeps the model (and backend) of its
vectors: the local backend's default became multilingual-e5-small, and without this an upgraded
index would look configured for a model its vectors are not from."""

from django.db import migrations


def keep_model(apps, schema_editor):
    IndexSetting = apps.get_model("indexing", "IndexSetting")
    EmbeddingFingerprint = apps.get_model("indexing", "EmbeddingFingerprint")
    if IndexSetting.objects.filter(name="PMD_EMBED_MODEL").exists():
        return
    used = EmbeddingFingerprint.objects.filter(chunks__isnull=False).distinct().order_by("-last_used_at", "-id").first()
    if used is None:
        return
    IndexSetting.objects.create(name="PMD_EMBED_MODEL", value=used.model)
    if used.backend and not IndexSetting.objects.filter(name="PMD_LLM_BACKEND").exists():
        IndexSetting.objects.create(name="PMD_LLM_BACKEND", value=used.backend)


class Migration(migrations.Migration):
    dependencies = [
        ("indexing", "0014_collection_transclude"),
    ]

    operations = [migrations.RunPython(keep_model, migrations.RunPython.noop)]
