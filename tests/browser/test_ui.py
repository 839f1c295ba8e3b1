"""The web UI in a real browser: login, search-as-you-type, documents, collections, errors."""

from __future__ import annotations

import re

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def indexed(corpus_copy, transactional_db):
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    collection = collection_create(path=corpus_copy, name="handbook")
    collection_index(collection)
    return collection


def test_login_is_required_and_the_empty_state_guides_staff(chromium, live_server, make_user, login, shot):
    page = chromium.new_page()
    page.goto(f"{live_server.url}/collections/")
    assert "/accounts/login/" in page.url
    shot(page, "01-login")
    page.close()
    make_user("lead", staff=True)
    page = login("lead")
    assert page.locator(".state h2").inner_text() == "Nothing indexed yet"
    shot(page, "02-empty-index")


def test_search_as_you_type_modes_keyboard_and_document_hit(live_server, make_user, login, indexed, shot):
    make_user("ana")
    page = login("ana")
    # Words of the note's body: a note found by its title alone shows its body's start, unmarked
    # (snippets never start inside the frontmatter).
    page.locator("#q").press_sequentially("postgresql rank", delay=30)
    first = page.locator("#results .result").first
    first.wait_for()
    assert "handbook/guides/postgres-tuning.md:" in first.locator(".path").inner_text()
    assert first.locator("mark").count() >= 1
    assert re.search(r"[?&]q=postgresql(\+|%20)rank", page.url)  # shareable, back-button friendly URL
    shot(page, "03-search-keyword")

    # The mode switch re-runs the search; whatever the mode answers, it is a clear state.
    page.click("label.mode:has-text('Hybrid')")
    page.wait_for_url(re.compile(r"mode=hybrid"))
    page.locator("#results .result, #results .state").first.wait_for()
    shot(page, "04-search-hybrid")
    page.click("label.mode:has-text('Keyword')")
    page.wait_for_url(re.compile(r"mode=keyword"))
    page.locator("#results .result").first.wait_for()

    # `/` focuses the box from anywhere; ↓ + Enter opens the first hit at its line.
    page.locator("h1, .summary").first.click() if page.locator(".summary").count() else None
    page.keyboard.press("Escape")
    page.locator("body").press("/")
    assert page.evaluate("document.activeElement.id") == "q"
    page.keyboard.press("ArrowDown")
    assert "active" in (page.locator("#results .result").first.get_attribute("class") or "")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/doc/handbook/guides/postgres-tuning\.md\?line=\d+"))
    hit = page.locator("article.document .hit").first
    hit.wait_for()
    assert hit.is_visible()
    assert page.locator("#doc-uri").inner_text() == "pmd://handbook/guides/postgres-tuning.md"
    shot(page, "05-document-hit")

    page.go_back()
    page.wait_for_url(re.compile(r"q=postgresql(\+|%20)rank"))
    assert page.locator("#q").input_value() == "postgresql rank"
    page.locator("#results .result").first.wait_for()


def test_document_view_source_and_dark_mode(live_server, make_user, login, indexed, shot):
    make_user("dee")
    page = login("dee", color_scheme="dark")
    page.goto(f"{live_server.url}/doc/handbook/guides/postgres-tuning.md?line=18#L18")
    page.locator(".doc-body .hit").wait_for()
    assert page.locator(".markdown h2").first.inner_text() == "HNSW indexes"
    shot(page, "06-document-dark")
    page.click(".tabs a:has-text('Source')")
    page.locator("#L18.hit").wait_for()
    shot(page, "07-document-source")


def test_staff_adds_a_collection_and_watches_the_progress_complete(
    live_server, make_user, login, corpus_copy, shot, settings
):
    settings.PMD_COLLECTION_ROOTS = [corpus_copy.parent]  # the web UI adds collections only under these
    make_user("ops", staff=True)
    page = login("ops")
    page.goto(f"{live_server.url}/collections/")
    page.fill("input[name=path]", str(corpus_copy))
    page.fill("input[name=name]", "team-notes")
    page.click("button:has-text('Add and index')")
    page.wait_for_url(f"{live_server.url}/collections/")
    page.locator(".job.done").wait_for(timeout=30_000)
    assert page.locator(".job.done progress").get_attribute("value") == "100"
    assert "team-notes" in page.locator("table.collections").inner_text()
    shot(page, "08-collections-added")
    page.click("button:has-text('Reindex')")
    page.locator(".job.queued, .job.running").wait_for()  # the row now follows the new job…
    page.locator(".job.done").wait_for(timeout=30_000)  # …and the page reloads when it ends
    assert page.locator("table.collections td.num").first.inner_text() == "6"
    assert page.locator(".job.done .problems").count() == 1  # the corpus has files that cannot be indexed cleanly
    shot(page, "09-collections-reindexed")


@pytest.fixture
def embedded(indexed, ollama):
    """The corpus embedded through the Ollama-compatible test server."""
    from indexing.services.embedding import embed_pending

    embed_pending(collections=[indexed.name])
    return indexed


def test_semantic_search_then_ollama_down_says_what_to_do(live_server, make_user, login, embedded, settings, shot):
    import socket

    make_user("sam")
    page = login("sam")
    page.click("label.mode:has-text('Semantic')")
    page.locator("#q").fill("approximate nearest neighbour graphs")
    page.locator("#results .result").first.wait_for()
    assert "mode=semantic" in page.url
    shot(page, "10-search-semantic")

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    settings.OLLAMA_URL = f"http://127.0.0.1:{closed_port}"
    settings.PMD_LLM_RETRIES = 0
    page.locator("#q").fill("vector index tuning")
    problem = page.locator("#results .state.problem.backend")
    problem.wait_for()
    assert "not reachable" in problem.inner_text()
    shot(page, "11-ollama-down")
    page.click("#results a:has-text('Search by keyword instead')")
    page.locator("#results .result").first.wait_for()
    assert "mode=keyword" in page.url


def test_no_embeddings_state_and_status_page(live_server, make_user, login, indexed, shot):
    make_user("root", staff=True)
    page = login("root")
    page.click("label.mode:has-text('Semantic')")
    page.locator("#q").fill("vector index")
    problem = page.locator("#results .state.problem")
    problem.wait_for()
    assert "No embeddings yet" in problem.inner_text()
    assert page.locator("#results button:has-text('Run embedding')").count() == 1
    shot(page, "12-no-embeddings")
    page.goto(f"{live_server.url}/status/")
    page.locator(".status").first.wait_for()
    assert page.locator(".status h2").first.inner_text().startswith("Database")
    shot(page, "13-status")


def test_phone_layout(chromium, live_server, make_user, login, indexed, shot):
    make_user("pia")
    desktop = login("pia")
    state = desktop.context.storage_state()  # reuse the session cookie on a phone-sized screen
    phone = chromium.new_context(
        viewport={"width": 390, "height": 844}, storage_state=state, is_mobile=True, has_touch=True
    )
    try:
        page = phone.new_page()
        page.goto(f"{live_server.url}/?q=pgvector+hnsw&mode=keyword")
        page.locator("#results .result").first.wait_for()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the page scrolls sideways on a phone ({width}px)"
        shot(page, "14-phone-search")
        page.locator("#results .result a.title").first.click()
        page.locator("article.document").wait_for()
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        shot(page, "15-phone-document")
    finally:
        phone.close()


def test_api_token_created_copied_used_and_revoked(live_server, make_user, login, shot):
    import httpx

    make_user("tess")
    page = login("tess")
    errors = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.click("nav.nav a:has-text('API tokens')")
    page.locator(".state.empty").wait_for()
    page.fill("input[name=name]", "research agent")
    page.click("button:has-text('Create token')")
    raw = page.locator("#new-token").inner_text().strip()
    assert raw.startswith("pmd_")
    copy = page.locator("button[data-copy='#new-token']")
    copy.click()
    page.locator("button[data-copy='#new-token']:has-text('Copied')").wait_for()  # pmd.js runs under the CSP
    shot(page, "16-token-created")
    status = httpx.get(f"{live_server.url}/api/status", headers={"Authorization": f"Bearer {raw}"})
    assert status.status_code == 200
    page.goto(f"{live_server.url}/tokens/")
    assert raw not in page.content()
    page.once("dialog", lambda dialog: dialog.dismiss())  # the confirmation can be cancelled
    page.click("button:has-text('Revoke')")
    assert page.locator(".badge:has-text('active')").count() == 1
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("button:has-text('Revoke')")
    page.locator(".badge:has-text('revoked')").wait_for()
    shot(page, "17-token-revoked")
    assert httpx.get(f"{live_server.url}/api/status", headers={"Authorization": f"Bearer {raw}"}).status_code == 401
    assert not [e for e in errors if "Content Security Policy" in e], errors


def test_history_page_searches_as_you_type(live_server, make_user, login, tmp_path, shot):
    """The History page had no search-as-you-type and a blank empty state."""
    from indexing.access import Access
    from indexing.services.refresh import collection_add
    from tests.support.history_repo import build_notes_repo

    build_notes_repo(tmp_path / "handbook")
    collection_add(path=tmp_path / "handbook", name="handbook", access=Access.local_user())
    make_user("hal")
    page = login("hal")
    page.goto(f"{live_server.url}/history/")
    assert "Search the git history of your collections" in page.locator("#history-results").inner_text()
    page.locator("#q").press_sequentially("weekends", delay=20)
    page.wait_for_url(re.compile(r"/history/\?q=weekends"))
    page.locator("#history-results .result.commit", has_text="Change the on-call rota").wait_for()
    assert page.locator("#history-results .score").count() > 0
    page.locator("#q").fill("")
    page.locator("#history-author").press_sequentially("bob", delay=20)
    page.wait_for_url(re.compile(r"author=bob"))
    page.locator("#history-results .result.commit").first.wait_for()
    page.wait_for_function("() => !document.querySelector('#history-results .score')")  # a list without words
    shot(page, "history-as-you-type")
