"""The Status page in a real browser with the model server down: it says down, in words,
no green light for embeddings, and nothing runs off a phone's screen."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
pytest_plugins = ["tests.support.ollama_fixtures"]


@pytest.fixture
def indexed(corpus_copy, transactional_db):
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    collection = collection_create(path=corpus_copy, name="handbook")
    collection_index(collection)
    return collection


def _green(section) -> bool:
    """Whether the section's light is the `ok` colour (what a person sees, not a class name)."""
    dot = section.locator(".dot")
    ok = section.page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--ok')").strip()
    colour = dot.evaluate("e => getComputedStyle(e).backgroundColor")
    probe = section.page.evaluate(
        "c => { const d = document.createElement('div'); d.style.color = c; document.body.append(d);"
        " const v = getComputedStyle(d).color; d.remove(); return v; }",
        ok,
    )
    return colour == probe


def test_status_page_with_the_model_server_down(live_server, make_user, login, indexed, ollama_down, shot):
    make_user("root", staff=True)
    page = login("root")
    page.goto(f"{live_server.url}/status/")
    models = page.locator("section[data-section=models]")
    embeddings = page.locator("section[data-section=embeddings]")
    models.wait_for()
    assert "Model server" in models.locator("h2").inner_text()
    assert "down: Ollama is not reachable" in models.inner_text() and "problem" in models.locator("h2").inner_text()
    assert not _green(models) and not _green(embeddings)
    assert _green(page.locator("section[data-section=database]"))  # the check itself tells green from red
    assert "waiting for the model server" in embeddings.inner_text()
    assert "Notes with vectors" in embeddings.inner_text()
    assert not embeddings.locator("details.raw pre").is_visible()  # raw values on demand
    embeddings.locator("details.raw summary").click()
    assert embeddings.locator("details.raw pre").is_visible()
    shot(page, "status-model-down")

    page.set_viewport_size({"width": 360, "height": 740})  # a phone: nothing wider than the screen
    wide = page.evaluate("document.documentElement.scrollWidth")
    assert wide <= 360, f"the status page is {wide}px wide on a 360px screen"
    shot(page, "status-model-down-phone")


def test_phone_shows_every_action_of_the_tokens_and_collections_tables(live_server, make_user, login, indexed):
    from indexing.access import Access
    from indexing.services.tokens import token_create

    user = make_user("root", staff=True)
    token_create(user=user, name="a rather long token name for a script", access=Access.for_user(user))
    page = login("root")
    page.set_viewport_size({"width": 360, "height": 740})
    for path, buttons in (("/tokens/", ["Revoke"]), ("/collections/", ["Reindex", "Embed"])):
        page.goto(f"{live_server.url}{path}")
        for name in buttons:
            button = page.locator(f"table.collections button:has-text('{name}')").first
            box = button.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 360, (path, name, box)
        assert page.evaluate("document.documentElement.scrollWidth") <= 360, path
