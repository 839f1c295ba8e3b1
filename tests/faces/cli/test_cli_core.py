"""The `pmd` CLI core, run in-process against the test database."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_collection_add_list_show_rename_remove(run_cli, corpus_dir):
    code, out, err = run_cli("collection", "add", str(corpus_dir), "--name", "notes")
    assert code == 0
    assert "6 added" in out
    assert "binary" in err and "invalid UTF-8" in err
    code, out, _ = run_cli("collection", "list", "--json")
    assert json.loads(out)[0]["documents"] == 6
    code, out, _ = run_cli("collection", "rename", "notes", "handbook")
    assert code == 0
    code, out, _ = run_cli("ls", "handbook/guides", "--json")
    assert {d["uri"] for d in json.loads(out)} == {
        "pmd://handbook/guides/identifiers.md",
        "pmd://handbook/guides/postgres-tuning.md",
    }
    code, _, err = run_cli("collection", "add", str(corpus_dir), "--name", "handbook")
    assert code == 1 and "is already collection 'handbook'" in err
    code, out, _ = run_cli("collection", "remove", "handbook")
    assert code == 0 and "6 documents" in out


def test_add_missing_folder_fails_cleanly(run_cli, tmp_path):
    code, out, err = run_cli("collection", "add", str(tmp_path / "missing"))
    assert code == 1
    assert "does not exist" in err
    assert "Traceback" not in err


def test_get_by_docid_with_line_window_and_numbers(run_cli, indexed_collection):
    from indexing.models import Document

    doc = Document.objects.get(collection=indexed_collection, path="guides/postgres-tuning.md")
    code, out, _ = run_cli("get", f"#{doc.docid}", "--from", "7", "-l", "2", "--line-numbers")
    assert code == 0
    assert out.splitlines() == [
        "7  # Ignored heading because frontmatter has a title",
        "8  ",
    ]
    code, out, _ = run_cli("get", "pmd://notes/guides/postgres-tuning.md:9", "-l", "1")
    assert out.startswith("PostgreSQL can rank")


def test_get_past_the_last_line_is_an_error(run_cli, indexed_collection):
    """`pmd get file.md:99` past the end printed nothing and exited 0."""
    code, out, err = run_cli("get", "pmd://notes/guides/postgres-tuning.md:9999")
    assert code == 1 and out == ""
    assert "line 9999 is past its end" in err and "pmd://notes/guides/postgres-tuning.md has" in err
    code, out, err = run_cli("get", "pmd://notes/guides/postgres-tuning.md", "--from", "9999")
    assert code == 1 and "past its end" in err


def test_get_miss_prints_suggestions_and_refuses_traversal(run_cli, indexed_collection):
    code, _, err = run_cli("get", "notes/guides/identifier.md")
    assert code == 1
    assert "pmd://notes/guides/identifiers.md" in err
    code, out, err = run_cli("get", "../../../etc/passwd")
    assert code == 1 and out == ""


def test_multi_get_and_update_and_cleanup(run_cli, indexed_collection, corpus_dir):
    code, out, _ = run_cli("multi-get", "notes/meetings/*.md", "-l", "1")
    assert out.count("==> pmd://notes/meetings/") == 3
    (corpus_dir / "README.md").unlink()
    code, out, _ = run_cli("update", "--json")
    assert json.loads(out)[0]["removed"] == 1
    code, out, _ = run_cli("cleanup", "--json")
    assert json.loads(out)["inactive_documents"] == 1


def test_context_commands(run_cli, indexed_collection):
    assert run_cli("context", "add", "pmd://notes/meetings", "Weekly meeting notes")[0] == 0
    assert run_cli("context", "add", "Everything the team knows")[0] == 0
    code, out, _ = run_cli("context", "list", "--json")
    assert {c["target"] for c in json.loads(out)} == {"/", "pmd://notes/meetings"}
    assert run_cli("context", "rm", "pmd://notes/meetings")[0] == 0


def test_status_reports_database_and_counts(run_cli, indexed_collection):
    code, out, _ = run_cli("status", "--json")
    report = json.loads(out)
    assert report["database"]["ok"] is True
    assert report["database"]["pgvector"]
    assert report["index"]["documents"] == 6


def test_text_from_notes_and_folders_prints_as_written(run_cli, tmp_path):
    """Titles, folder names, contexts and patterns are text, not rich markup or :emoji: codes: a note
    titled `[/draft]` once made `pmd ls` fail, and a folder named `[notes]` printed as `/`."""
    folder = tmp_path / "[notes]"
    folder.mkdir()
    title = "Plan [/draft] :smile: [bold]x"
    (folder / "plan.md").write_text(f"# {title}\n\nThe plan.\n")
    code, out, err = run_cli("collection", "add", str(folder), "--name", "plans", "--ignore", "[ab]*.md")
    assert code == 0, err
    assert str(folder) in out
    code, out, err = run_cli("ls", "plans")
    assert code == 0, err
    assert title in out and "😄" not in out
    code, out, _ = run_cli("ls")
    assert f"{folder}" in out
    code, _, err = run_cli("context", "add", "pmd://plans/", "a [/ctx] context :smile:")
    assert code == 0, err
    code, out, _ = run_cli("context", "list")
    assert "a [/ctx] context :smile:" in out
    code, out, err = run_cli("collection", "show", "plans")
    assert code == 0, err
    assert f"path: {folder}" in out and "ignore: [ab]*.md" in out and "a [/ctx] context :smile:" in out
    code, out, _ = run_cli("status")
    assert f"Path: {folder}" in out


def test_progress_bar_shows_folder_and_file_names_as_written(monkeypatch, capsys):
    """On a terminal the bar shows the folder and the file being indexed: `x[/y]` in either once
    made `pmd collection add` fail after it had indexed everything."""
    import sys

    from pmd_site.cli.output import progress_bar

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    with progress_bar("indexing x[/y]") as update:
        update(1, 2, "notes[/draft]/a [red]b.md")
        update(2, 2, "[/z].md")
    assert "Traceback" not in capsys.readouterr().err


def test_db_status_prints_a_home_with_brackets_as_written(run_cli, settings, tmp_path):
    settings.PMD_HOME = tmp_path / "x[/y] [red]home"
    code, out, _ = run_cli("db", "status")
    assert code == 3  # not running
    assert f"stopped (data {settings.PMD_HOME}" in out


def test_user_create_refuses_a_name_the_web_would_refuse(run_cli, db, monkeypatch):
    import io
    import sys

    from django.contrib.auth import get_user_model

    monkeypatch.setattr(sys, "stdin", io.StringIO("correct horse battery staple 9\n"))
    code, _, err = run_cli("user", "create", "[/x]", "--password-stdin")
    assert code == 1
    assert "'[/x]' cannot be a username" in err and "letters, numbers" in err
    assert not get_user_model().objects.filter(username="[/x]").exists()


def test_garbage_collection_resumes_after_start_up(run_cli, indexed_collection):
    """`pmd` pauses the garbage collector while it starts; a command, a failure or a usage error
    leaves it on (main() also runs inside other processes: these tests, scripts)."""
    import gc

    assert gc.isenabled()
    with pytest.raises(SystemExit):
        run_cli("search", "--no-such-option")
    assert gc.isenabled()
    assert run_cli("ls", "notes")[0] == 0
    assert gc.isenabled()
    assert run_cli("get", "notes/no-such-note.md")[0] == 1
    assert gc.isenabled() and gc.get_freeze_count() == 0  # nothing left out of collection either


def test_server_log_lines_never_reach_a_client_s_stderr(monkeypatch):
    """`INFO httpx: HTTP Request …` of the server reached `pmd` clients through the socket."""
    import logging
    import logging.config
    import sys

    from django.conf import settings

    from pmd_site.cli.local_server import _stream
    from pmd_site.cli.output import ClientTerminal, install_client_streams, printing_for

    monkeypatch.setattr(sys, "stdout", sys.stdout)  # put back afterwards
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    install_client_streams()  # as a server answering clients does, before or after logging is set up
    logging.config.dictConfig(settings.LOGGING)
    chunks: list = []
    info = {"encoding": "utf-8", "errors": "strict", "tty": False}
    terminal = ClientTerminal(
        stdout=_stream(b"1", chunks, info), stderr=_stream(b"2", chunks, info), environ={}, size=None, help_width=None
    )
    with printing_for(terminal):
        logging.getLogger("pmd.test").warning("a line for the server's log")
        print("the command's own output")
    assert chunks == [(b"1", b"the command's own output"), (b"1", b"\n")]
