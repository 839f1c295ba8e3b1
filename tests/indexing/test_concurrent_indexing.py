"""Two indexers of one collection at once (a `pmd update` while the watcher re-indexes):
no errors, and the index ends up as a clean index of the files would be."""

from __future__ import annotations

import shutil
import threading

import pytest
from django.db import connection

from indexing.keyword.keyword_index import keyword_index_update
from indexing.models import Collection, Document
from indexing.services.collections import collection_create
from indexing.services.scanning import collection_index

pytestmark = pytest.mark.django_db(transaction=True)  # the threads need to see each other's commits

WORDS = [
    "vacuum",
    "autovacuum",
    "planner",
    "index",
    "btree",
    "deploy",
    "rollback",
    "release",
    "meeting",
    "budget",
    "tuning",
    "replica",
]


def note(i: int, version: int = 0) -> str:
    words = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(8 + version))
    return f"# Note {i} v{version}\n\n## {WORDS[i % len(WORDS)]}\n\n{words}\n" + "body text. " * (version + 1)


def run_together(workers: int, work) -> list[BaseException]:
    """Run work(i) in `workers` threads released at the same instant; the errors they raised."""
    barrier = threading.Barrier(workers)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            work(i)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)
        finally:
            connection.close()  # each thread has its own connection

    threads = [threading.Thread(target=run, args=(i,)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def documents_of(collection: Collection) -> set[tuple]:
    return set(Document.objects.filter(collection=collection, active=True).values_list("path", "title", "content_id"))


def keyword_rows_of(collection: Collection) -> tuple[list, list]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT d.path, k.ordinal, k.start_line, k.end_line, k.start_char, k.end_char, k.length, k.tsv::text"
            " FROM search_keyword_passage k"
            " JOIN indexing_document d ON d.id = k.document_id WHERE d.collection_id = %s ORDER BY 1, 2",
            [collection.pk],
        )
        passages = cursor.fetchall()
        cursor.execute(
            "SELECT d.path, k.ordinal, p.lexeme, p.tf_title, p.tf_body, p.length FROM search_keyword_posting p"
            " JOIN search_keyword_passage k ON k.id = p.passage_id"
            " JOIN indexing_document d ON d.id = p.document_id WHERE d.collection_id = %s ORDER BY 1, 2, 3",
            [collection.pk],
        )
        return passages, cursor.fetchall()


def assert_statistics_consistent() -> None:
    """Per-collection document frequencies and statistics agree with the rows they summarise."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM (SELECT lexeme, collection_id, count(*) AS df FROM search_keyword_posting"
            " GROUP BY lexeme, collection_id) p"
            " FULL JOIN search_keyword_term t USING (lexeme, collection_id) WHERE p.df IS DISTINCT FROM t.df"
        )
        assert cursor.fetchone()[0] == 0
        cursor.execute(
            "SELECT collection_id, count(*), count(DISTINCT document_id), sum(length)"
            " FROM search_keyword_passage GROUP BY 1 ORDER BY 1"
        )
        counted = cursor.fetchall()
        cursor.execute(
            "SELECT collection_id, n_passages, n_documents, total_length FROM search_keyword_stats ORDER BY 1"
        )
        assert cursor.fetchall() == counted
        cursor.execute(
            "SELECT count(*) FROM search_keyword_passage k JOIN indexing_document d"
            " ON d.id = k.document_id WHERE NOT d.active"
        )
        assert cursor.fetchone()[0] == 0


def test_two_indexers_of_one_collection_while_files_change(tmp_path):
    root = tmp_path / "churn"
    root.mkdir()
    for i in range(30):
        (root / f"note-{i:02d}.md").write_text(note(i))
    collection = collection_create(path=root, name="churn")
    collection_index(collection)

    errors: list[BaseException] = []
    for round_ in range(1, 9):

        def churn(round_=round_):
            for i in range(round_ * 3, round_ * 3 + 3):  # new files (and files coming back)
                (root / f"new-{i % 10:02d}.md").write_text(note(100 + i, round_))
            for i in range(round_, 30, 7):  # edited files
                (root / f"note-{i:02d}.md").write_text(note(i, round_))
            for path in sorted(root.glob("new-*.md"))[:2]:  # deleted files
                path.unlink()

        def work(i: int) -> None:
            if i == 2:
                churn()
            else:
                collection_index(Collection.objects.get(pk=collection.pk))

        errors += run_together(3, work)
    # the files stop changing; two indexers once more, at the same time
    errors += run_together(2, lambda i: collection_index(Collection.objects.get(pk=collection.pk)))
    assert errors == []

    shutil.copytree(root, tmp_path / "clean")
    clean = collection_create(path=tmp_path / "clean", name="clean")
    collection_index(clean)
    assert documents_of(collection) == documents_of(clean)
    assert len(documents_of(collection)) == len(list(root.glob("*.md")))
    assert keyword_rows_of(collection) == keyword_rows_of(clean)
    assert_statistics_consistent()


def test_writing_the_keyword_index_of_the_same_documents_concurrently_never_raises(corpus_dir):
    collection = collection_create(path=corpus_dir, name="notes")
    collection_index(collection)
    before = keyword_rows_of(collection)
    ids = list(Document.objects.filter(collection=collection, active=True).values_list("id", flat=True))
    assert ids and before[0]

    def rewrite(_i: int) -> None:
        for _ in range(15):
            keyword_index_update(changed_document_ids=ids, removed_document_ids=[])

    assert run_together(3, rewrite) == []
    keyword_index_update(changed_document_ids=ids, removed_document_ids=[])  # and once more, alone
    assert keyword_rows_of(collection) == before
    assert_statistics_consistent()
