"""The Content-Security-Policy breaks nothing: pages, the admin and Swagger UI run without violations."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser


@pytest.fixture
def indexed(corpus_copy, transactional_db):
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    (corpus_copy / "prices.md").write_text("# Prices\n\n| item | price |\n|:-----|------:|\n| tea | 3.50 |\n")
    collection = collection_create(path=corpus_copy, name="handbook")
    collection_index(collection)
    return collection


def _watch_violations(page) -> list[str]:
    """Chromium reports each blocked script, style or image on the console."""
    seen: list[str] = []
    page.on("console", lambda msg: seen.append(msg.text) if "Content Security Policy" in msg.text else None)
    return seen


def test_pages_admin_and_api_docs_run_under_the_policy(live_server, make_user, login, indexed, shot):
    make_user("olga", staff=True)
    page = login("olga")
    violations = _watch_violations(page)
    elsewhere: list[str] = []  # requests to any host but pmd (a CDN, remote images)
    page.on("request", lambda req: elsewhere.append(req.url) if not req.url.startswith(live_server.url) else None)

    page.goto(f"{live_server.url}/api/docs")
    page.locator(".swagger-ui .info .title").filter(has_text="pmd API").wait_for()
    page.locator(".opblock-summary").first.wait_for()  # the schema was fetched and drawn
    page.locator(".opblock-summary").first.click()
    page.locator(".opblock-body").first.wait_for()
    shot(page, "api-docs")

    page.goto(f"{live_server.url}/")
    page.locator("#q").press_sequentially("postgres tuning", delay=30)
    page.locator("#results .result").first.wait_for()
    page.goto(f"{live_server.url}/doc/handbook/guides/postgres-tuning.md?line=18#L18")
    page.locator(".doc-body .hit").wait_for()
    page.goto(f"{live_server.url}/doc/handbook/prices.md")
    price = page.locator(".markdown td").nth(1)
    assert price.inner_text() == "3.50"
    assert price.evaluate("el => getComputedStyle(el).textAlign") == "right"  # style attributes still apply

    page.goto(f"{live_server.url}/admin/")
    page.locator("#site-name").wait_for()
    page.goto(f"{live_server.url}/admin/password_change/")
    page.locator("input[name=old_password]").wait_for()

    assert violations == []
    assert elsewhere == []
