"""`pmd bench --mode filtered`: the synthetic vault is the same for the same size, and the bench
measures every filter shape on it with the filters applied (the notes it counts do match)."""

from __future__ import annotations

import hashlib

import pytest

from indexing.errors import BenchmarkError
from pmd_site.bench.filtered import SHAPES, bench_filtered, corpus_write
from pmd_site.bench.quality import BenchOptions

pytestmark = pytest.mark.django_db


def _digest(folder) -> str:
    h = hashlib.sha256()
    for path in sorted((folder / "docs").rglob("*.md")):
        h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def test_the_corpus_is_the_same_for_the_same_size(tmp_path):
    assert corpus_write(tmp_path / "a", 1000) and corpus_write(tmp_path / "b", 1000)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert not corpus_write(tmp_path / "a", 1000), "kept: nothing to write again"
    assert corpus_write(tmp_path / "a", 1200) and _digest(tmp_path / "a") != _digest(tmp_path / "b")
    assert len(list((tmp_path / "a" / "docs").rglob("*.md"))) == 1200


def test_every_filter_shape_is_measured_with_its_filter(tmp_path):
    from indexing.models import Document

    report = bench_filtered(str(tmp_path / "vault"), BenchOptions(docs=1000))
    data = report.data
    assert data["documents"] == 1000 and set(data["shapes"]) == {label for label, _ in SHAPES}
    notes = Document.objects.filter(active=True)
    assert data["shapes"]["tag, common"]["matching"] == notes.filter(tags_with_parents__contains=["tag-0"]).count()
    nested = sum(any(t.startswith("project/") for t in tags) for tags in notes.values_list("tags", flat=True))
    assert data["shapes"]["nested tag (parent)"]["matching"] == nested > 0
    assert data["shapes"]["path, one area"]["matching"] == notes.filter(path__startswith="research/").count() == 100
    assert 0.9 <= data["hnsw_recall"] <= 1.0 and data["service_recall"] == 1.0  # ≤ 5,000 notes: exact scans
    assert data["keyword_p50_ms"] > 0 and data["vector_p50_ms"] > 0
    with pytest.raises(BenchmarkError):
        bench_filtered(str(tmp_path / "small"), BenchOptions(docs=10))
