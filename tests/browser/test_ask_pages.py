"""Ask in a real browser: the answer streams in (several updates before the checked answer), and a
citation opens the document view at the cited line."""

from __future__ import annotations

import re

import pytest

from tests.support.ollama_server import answer_from_passages

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NOTES = {
    "ops/vacuum.md": "---\ntags: [postgres]\n---\n\n# Tuning PostgreSQL autovacuum\n\nSome history first.\n\n"
    "## Dead tuples\n\nLower autovacuum_vacuum_scale_factor so vacuum runs after fewer dead "
    "tuples. Dead rows bloat tables and slow every query.\n",
    "kitchen/bread.md": "# Baking sourdough bread\n\nFeed the starter flour and water, let the dough rise "
    "overnight, bake in a hot oven until the crust is dark.\n",
}

# Every text the answer box shows while the answer is written (its length, once per change).
RECORD_UPDATES = """
window.__askUpdates = [];
new MutationObserver(function () {
  var out = document.querySelector(".ask-answer");
  if (!out) return;
  var n = out.textContent.length, seen = window.__askUpdates;
  if (n && seen[seen.length - 1] !== n) seen.push(n);
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


@pytest.fixture
def answering(tmp_path, ollama, settings):
    """A small embedded collection and a chat model that answers from the passages, citing them,
    a few words at a time."""
    from indexing.services.embedding import embed_pending
    from tests.support.factories import make_vault

    settings.PMD_GENERATE_MODEL = "none"
    settings.PMD_RERANK_MODEL = "none"
    settings.PMD_ANSWER_MODEL = "qwen3:0.6b"
    settings.PMD_ANSWER_MIN_SCORE = 0.1
    settings.PMD_ANSWER_RATE = 0
    make_vault(tmp_path / "team", NOTES, name="team")
    embed_pending()
    ollama.chat_handler = answer_from_passages("cite")
    ollama.stream_delay = 0.05
    return ollama


def test_ask_streams_the_answer_and_a_citation_opens_the_cited_line(live_server, make_user, login, answering, shot):
    make_user("ana")
    page = login("ana")
    page.context.add_init_script(RECORD_UPDATES)
    page.reload()
    page.click("label.mode:has-text('Ask')")
    page.locator("#q").fill("how do I tune autovacuum for dead tuples")
    page.locator("#q").press("Enter")

    answer = page.locator("#results .answer")
    answer.wait_for()
    updates = page.evaluate("window.__askUpdates")
    assert len(updates) >= 2 and updates == sorted(updates), updates  # written as it streamed, growing
    assert "mode=ask" in page.url
    cite = answer.locator(".answer-text a.cite").first
    source = cite.get_attribute("title")  # pmd://team/ops/vacuum.md:13
    assert source.startswith("pmd://team/ops/vacuum.md:")
    line = int(source.rsplit(":", 1)[1])
    shot(page, "ask-01-answer")

    cite.click()
    page.wait_for_url(re.compile(rf"/team/ops/vacuum\.md.*#L{line}$"))
    target = page.locator("article.document .doc-body .hit")
    target.wait_for()
    first, last = int(target.get_attribute("data-ls")), int(target.get_attribute("data-le"))
    assert first <= line <= last
    assert "autovacuum_vacuum_scale_factor" in target.inner_text()
    shot(page, "ask-02-cited-line")
