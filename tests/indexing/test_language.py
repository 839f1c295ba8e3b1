"""A collection's language picks PostgreSQL's text search configuration (stemming, stop words)."""

from __future__ import annotations

import pytest

from indexing.language import detect_language, detect_notes_language, language_choice

GERMAN = (
    "# Archive\n\nErstelle ein Archiv von Dateien und entpacke es in das Verzeichnis, wenn die "
    "Dateien nicht mehr gebraucht werden. Das ist mit dem Befehl `tar xf datei.tar` möglich.\n"
)
JAPANESE = (
    "# tar\n\nアーカイブを作成し、それをファイルに書き込む。"
    "gzip や bzip2 などの圧縮方法と組み合わせることが多いです。\n"
)
CHINESE = "# tar\n\n归档实用工具。通常与压缩方法结合使用，例如 gzip 或 bzip2。创建一个归档并写入文件。\n"
ENGLISH = (
    "# tar\n\nArchiving utility. Often combined with a compression method, such as gzip or bzip2, "
    "for the files you have.\n"
)


@pytest.mark.parametrize(
    "text, code",
    [
        (GERMAN, "de"),
        (JAPANESE, "ja"),
        (CHINESE, "zh"),
        (ENGLISH, "en"),
        ("Привет, мир: это заметка о поиске по тексту.", "ru"),
    ],
)
def test_detect_language_by_script_then_common_words(text, code):
    assert detect_language(text) == code


def test_code_and_links_do_not_vote():
    """A Chinese page full of English commands is still Chinese."""
    text = CHINESE + "\n".join(f"`docker container run --name {{{{name}}}} --rm image{i}`" for i in range(20))
    assert detect_language(text) == "zh"


def test_too_little_text_is_no_answer_and_mixed_notes_are_mixed():
    assert detect_language("ok") is None
    assert detect_notes_language([GERMAN] * 9 + [ENGLISH]) == "de"
    assert detect_notes_language([GERMAN, ENGLISH * 2, JAPANESE * 3, CHINESE * 3]) == "mixed"


_FRONTMATTER = "---\ntags: [project, reading]\naliases: [Overview]\ncssclasses: wide\ncreated: 2024-03-01\n---\n"
_LINKS = " [[Projects]] [[Archive]]"


def test_a_vault_of_four_languages_and_many_daily_notes_is_mixed():
    """Daily notes of tasks and names tell no language: they no longer count as English."""
    english = _FRONTMATTER + "# Reading\n\nThis is the list of books that I want to read this year, and why." + _LINKS
    german = (
        _FRONTMATTER + "# Lesen\n\nDas ist die Liste der Bücher, die ich in diesem Jahr lesen will, und warum." + _LINKS
    )
    french = _FRONTMATTER + "# Lire\n\nC'est la liste des livres que je veux lire cette année, et pourquoi." + _LINKS
    spanish = _FRONTMATTER + "# Leer\n\nEsta es la lista de los libros que quiero leer este año, y por qué." + _LINKS
    daily = _FRONTMATTER + "# 2024-03-01\n\n- [ ] Meeting Anna 10:00\n- [ ] Groceries\n- [x] Gym\n" + _LINKS * 3
    assert [detect_language(t) for t in (english, german, french, spanish, daily)] == ["en", "de", "fr", "es", None]
    assert detect_notes_language([english] * 5 + [german, french, spanish] * 2 + [daily] * 6) == "mixed"
    assert detect_notes_language([german] * 9 + [daily] * 9) == "de"


def test_choice_config_wins_then_language_then_detection_then_fallback():
    assert language_choice(language="de", config="simple", sample=None, fallback_config="english").config == "simple"
    assert language_choice(language="de", config=None, sample=None, fallback_config="english").config == "german"
    assert language_choice(language="German", config=None, sample=None, fallback_config="english").code == "de"
    detected = language_choice(language="auto", config=None, sample=[JAPANESE], fallback_config="english")
    assert (detected.code, detected.config, detected.detected) == ("ja", "simple", True)
    assert detected.label == "Japanese (detected)"
    assert language_choice(language=None, config=None, sample=[], fallback_config="english").config == "english"
    with pytest.raises(ValueError):
        language_choice(language="klingon", config=None, sample=None, fallback_config="english")


def test_snowball_configurations_exist_on_the_server(db):
    from django.db import connection

    from indexing.language import LANGUAGES

    with connection.cursor() as cursor:
        cursor.execute("SELECT cfgname FROM pg_ts_config")
        shipped = {row[0] for row in cursor.fetchall()}
    assert {config for _, config in LANGUAGES.values()} <= shipped


def test_collection_add_detects_german_and_stems_it(db, tmp_path, run_cli):
    from indexing.access import Access
    from indexing.models import Collection
    from indexing.services.refresh import collection_add

    folder = tmp_path / "archiv"
    folder.mkdir()
    (folder / "tar.md").write_text(GERMAN, encoding="utf-8")
    (folder / "zip.md").write_text(
        "# zip\n\nKomprimiere Dateien in ein Archiv, das man auf anderen Rechnern "
        "entpacken kann. Die Dateien bleiben erhalten.\n",
        encoding="utf-8",
    )
    code, out, _ = run_cli("collection", "add", str(folder), "--name", "archiv")
    assert code == 0 and "language: German (detected)" in out
    assert Collection.objects.get(name="archiv").text_search_config == "german"
    code, out, _ = run_cli("search", "Archive", "-c", "archiv", "--json")  # German stemming: Archive → archiv
    assert code == 0 and "tar.md" in out

    other = tmp_path / "other"
    other.mkdir()
    (other / "a.md").write_text(ENGLISH, encoding="utf-8")
    added = collection_add(path=other, name="other", language="fr", index="no", access=Access.local_user())
    assert added.collection.text_search_config == "french"
    code, out, _ = run_cli("collection", "show", "other")
    assert "French" in out


def test_unknown_language_is_refused(db, tmp_path, run_cli):
    (tmp_path / "a.md").write_text(ENGLISH, encoding="utf-8")
    code, out, err = run_cli("collection", "add", str(tmp_path), "--language", "klingon", "--no-index")
    assert code != 0 and "unknown language 'klingon'" in (out + err)


def test_api_add_takes_a_language_and_lists_it(db, tmp_path, settings):
    from django.contrib.auth import get_user_model
    from django.test import Client

    settings.PMD_COLLECTION_ROOTS = [tmp_path]
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text(JAPANESE, encoding="utf-8")
    admin = get_user_model().objects.create_superuser("root", password="x" * 12)
    client = Client()
    client.force_login(admin)
    response = client.post(
        "/api/collections", {"path": str(tmp_path / "notes"), "index": False}, content_type="application/json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["collection"]["language"] == "simple"
    assert response.json()["collection"]["text_search_config"] == "simple"
    (tmp_path / "notes2").mkdir()  # a folder is one collection
    response = client.post(
        "/api/collections",
        {"path": str(tmp_path / "notes2"), "name": "n2", "language": "es", "index": False},
        content_type="application/json",
    )
    assert response.json()["collection"]["language"] == "Spanish"


def test_the_admin_adds_with_a_language_or_detects_it(db, tmp_path, settings, django_capture_on_commit_callbacks):
    from django.contrib.auth import get_user_model
    from django.test import Client

    from indexing.models import Collection

    settings.PMD_COLLECTION_ROOTS = [tmp_path]
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text(GERMAN, encoding="utf-8")
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", password="x" * 12))
    form = {"root_path": str(tmp_path / "notes"), "mask": "**/*.md", "ignore_patterns": "[]", "visibility": "everyone"}
    page = client.get("/admin/indexing/collection/add/").content.decode()
    assert 'name="language"' in page
    with django_capture_on_commit_callbacks(execute=False):
        assert (
            client.post("/admin/indexing/collection/add/", {**form, "name": "es"} | {"language": "es"}).status_code
            == 302
        )
        (tmp_path / "auto").mkdir()  # a folder is one collection
        (tmp_path / "auto" / "a.md").write_text(GERMAN, encoding="utf-8")
        auto = {**form, "name": "auto", "root_path": str(tmp_path / "auto")}
        assert client.post("/admin/indexing/collection/add/", auto).status_code == 302
    assert Collection.objects.get(name="es").text_search_config == "spanish"
    assert Collection.objects.get(name="auto").text_search_config == "german"  # detected from the note
    change = client.get(f"/admin/indexing/collection/{Collection.objects.get(name='es').pk}/change/").content.decode()
    assert 'name="language"' not in change  # afterwards the text search configuration says it


@pytest.mark.parametrize(
    "query, code",
    [
        ("如何查看容器的日志", "zh"),
        ("過去に実行したコマンドを見るには？", "ja"),
        ("Wie öffne ich eine SQLite-Datenbank?", "de"),
        ("how do I remove a stopped docker container", "en"),
        ("kubectl port-forward", None),
    ],
)
def test_query_language(query, code):
    from indexing.language import query_language

    assert query_language(query) == code


def test_english_only_models_are_known():
    from indexing.llm.prompts import model_is_english_only

    assert model_is_english_only("all-minilm") and model_is_english_only("sentence-transformers/all-MiniLM-L6-v2")
    assert not model_is_english_only("multilingual-e5-small") and not model_is_english_only("embeddinggemma")
    assert not model_is_english_only("bge-m3") and not model_is_english_only("some-unknown-model")


def test_fusion_silences_an_english_model_on_a_japanese_query():
    """The vector list of an English-only model on a Japanese query has no say: keyword order stays."""
    from search.pipeline.fusion import RankedList, fuse, vector_trust

    keyword = RankedList("original/keyword", ["a", "b", "c"], scores=[0.9, 0.5, 0.4], values=[9.0, 5.0, 4.0])
    vector = RankedList("original/vector", ["c", "b", "x"], scores=[0.9, 0.3, 0.2])
    trust = vector_trust("ja", english_only_model=True)
    assert trust == 0.0
    fused = fuse([keyword, vector], trust=trust)
    assert [c.key for c in fused.candidates][:3] == ["a", "b", "c"] and fused.weights["vector"] == 0.0
    assert fused.explain()["vector_trust"] == 0.0
    assert vector_trust("ja", english_only_model=False) == 1.0 and vector_trust(None, english_only_model=True) == 1.0
    assert 0.0 < vector_trust("de", english_only_model=True) < 1.0
    assert [c.key for c in fuse([keyword, vector]).candidates][0] == "c"  # full trust: the vector's #1 can lead


def test_bench_reports_by_query_group_and_finds_the_shipped_set():
    from pmd_site.bench.quality import _dataset, evaluate_groups, read_groups

    root = _dataset("tldr-multi")
    groups = read_groups(root / "query_groups.tsv")
    assert len(groups) == 80 and groups["ja-02"] == ["ja", "question"]
    run = {"q1": ["x", "a"], "q2": ["b"], "q3": ["z"]}
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}
    by = evaluate_groups(run, qrels, {"q1": ["de"], "q2": ["de"], "q3": ["ja"]})
    assert by["de"]["ranks"] == {"q1": 2, "q2": 1} and by["de"]["top1"] == 1 and by["de"]["median_rank"] == 1.5
    assert by["ja"]["missing"] == 1 and by["ja"]["nDCG@10"] == 0.0
