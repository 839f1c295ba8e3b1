"""Fill the notes' structure (0005) for documents indexed before it: tags, the note's date and its
source, and the links, from each document's stored text, frontmatter, path and mtime; then resolve
the links of every collection and list the unresolved ones as problems of their notes (the next scan
rewrites them). An upgraded index has all of it without a re-scan."""

from django.db import migrations

BATCH = 500


def backfill(apps, schema_editor):
    from indexing.services.links import links_resolve_models, links_store  # noqa: PLC0415 - a migration is history: today's code loads only when this step runs
    from indexing.structure import note_structure  # noqa: PLC0415 - a migration is history: today's code loads only when this step runs

    Collection = apps.get_model("indexing", "Collection")
    Document = apps.get_model("indexing", "Document")
    DocumentLink = apps.get_model("indexing", "DocumentLink")
    FileProblem = apps.get_model("indexing", "FileProblem")

    DocumentLink.objects.all().delete()  # none yet: a re-run starts clean
    docs, links = [], []

    def flush():
        Document.objects.bulk_update(docs, ["tags", "note_date", "date_source"], batch_size=BATCH)
        links_store(links, links=DocumentLink)
        docs.clear()
        links.clear()

    rows = (
        Document.objects.order_by("pk")
        .select_related("content")
        .only("id", "path", "mtime", "frontmatter", "content__body")
    )
    for doc in rows.iterator(chunk_size=BATCH):
        structure = note_structure(doc.content.body, doc.frontmatter or {}, doc.path, doc.mtime or None)
        doc.tags, doc.note_date, doc.date_source = structure.tags, structure.date, structure.date_source
        docs.append(doc)
        links.append((doc.pk, structure.links))
        if len(docs) >= BATCH:
            flush()
    flush()
    for collection_id in Collection.objects.values_list("pk", flat=True):
        resolution = links_resolve_models(collection_id, documents=Document, links=DocumentLink)
        FileProblem.objects.bulk_create(
            [
                FileProblem(collection_id=collection_id, path=path, severity="warning", message=message)
                for path, message in resolution.problems
            ],
            batch_size=1000,
        )


class Migration(migrations.Migration):
    dependencies = [
        ("indexing", "0005_structure"),
    ]

    operations = [
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
    ]
