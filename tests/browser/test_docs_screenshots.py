"""The screenshots the docs show, taken from the real web UI in light and dark, at 1280 and 390 px.

Every run renders each page and checks what a reader of the docs would see on it; with
PMD_DOCS_SCREENSHOTS=1 the pictures are written into docs/assets/screenshots/ (to commit),
otherwise into test-artifacts/. tests/faces/test_docs.py checks that every picture a page
shows exists.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.browser.conftest import ARTIFACTS, PASSWORD
from tests.support.paths import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
pytest_plugins = ["tests.support.ollama_fixtures"]

DOCS_SHOTS = ROOT / "docs" / "assets" / "screenshots"
MAX_BYTES = 150_000
WIDTHS = {1280: 800, 390: 844}
NOTES = {
    "runbooks/rollback.md": (
        "---\ntitle: Rolling back a release\ntags: [deploy, runbook]\ndate: 2025-05-12\n---\n\n"
        "# Rolling back a release\n\nWhen a release breaks checkout, roll it back before you debug it.\n\n"
        "## Steps\n\n1. Pause the deploy pipeline.\n2. Run `deploy rollback --to previous`.\n"
        "3. Check the error rate on the dashboard for ten minutes.\n\n"
        "> [!warning] Database migrations\n> A migration that dropped a column cannot be rolled back: "
        "restore the column first.\n\nSee [[Release checklist]] and [[2025-05-12 incident review]].\n"
    ),
    "runbooks/Release checklist.md": (
        "---\ntags: [deploy]\n---\n\n# Release checklist\n\n- Freeze merges an hour before the release.\n"
        "- Tag the release and write the changelog.\n- Keep the rollback command ready: [[rollback]].\n"
    ),
    "meetings/2025-05-12 incident review.md": (
        "---\ntags: [meeting, incident]\nauthor: Ana Lopez\n---\n\n# Incident review: checkout errors\n\n"
        "The release at 14:02 raised checkout errors to 4 %. We rolled back at 14:20.\n\n"
        "## Decisions\n\n- Canary releases for the checkout service from now on.\n"
        "- The rollback runbook gets a step for migrations.\n"
    ),
    "meetings/2025-05-19 standup.md": (
        "---\ntags: [meeting]\n---\n\n# Standup\n\nCanary releases are live for checkout. "
        "Nobody needed a rollback this week.\n"
    ),
    "guides/postgres-tuning.md": (
        "---\ntitle: Tuning PostgreSQL\ntags: [database, performance]\ndate: 2025-03-14\n---\n\n"
        "# Tuning PostgreSQL\n\nAutovacuum keeps dead tuples in check; lower `autovacuum_vacuum_scale_factor` "
        "for large tables.\n\n## Indexes\n\npgvector builds HNSW graphs for nearest neighbour search.\n"
    ),
}


@pytest.fixture
def team_notes(ollama, settings):
    """The notes under a short folder name, as a reader's own would be (the page shows it)."""
    from tests.support.factories import make_vault

    settings.PMD_GENERATE_MODEL = "none"
    settings.PMD_RERANK_MODEL = "none"
    folder = Path(tempfile.mkdtemp(prefix="pmd-docs-"))
    settings.PMD_COLLECTION_ROOTS = [folder]  # the Collections page offers its form, as on a server
    yield make_vault(folder / "team", NOTES, name="team", embed=True)
    shutil.rmtree(folder)


def _save(page, name: str) -> int:
    """The viewport as a 256-colour PNG (small enough to commit); its size in bytes."""
    from PIL import Image

    image = Image.open(io.BytesIO(page.screenshot())).convert("RGB")
    small = image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    folder = DOCS_SHOTS if os.environ.get("PMD_DOCS_SCREENSHOTS") else ARTIFACTS
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}.png"
    small.save(target, optimize=True)
    return target.stat().st_size


def _signed_in(chromium, live_server, scheme: str, width: int):
    context = chromium.new_context(viewport={"width": width, "height": WIDTHS[width]}, color_scheme=scheme)
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "ana")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    return context, page


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_pages_the_docs_show_render_in_both_themes_and_widths(live_server, make_user, chromium, team_notes, scheme):
    make_user("ana", staff=True)
    sizes = {}
    for width in WIDTHS:
        context, page = _signed_in(chromium, live_server, scheme, width)
        try:
            page.goto(f"{live_server.url}/?q=rollback+release&mode=hybrid")
            page.locator("#results .result").first.wait_for()
            assert "Rolling back a release" in page.locator("#results").inner_text()
            sizes[f"search-{scheme}-{width}"] = _save(page, f"search-{scheme}-{width}")

            page.goto(f"{live_server.url}/doc/team/runbooks/rollback.md")
            page.locator("article.document").wait_for()
            assert "Pause the deploy pipeline" in page.locator("article.document").inner_text()
            sizes[f"document-{scheme}-{width}"] = _save(page, f"document-{scheme}-{width}")

            if width == 1280:
                page.goto(f"{live_server.url}/status/")
                page.locator("section[data-section=embeddings]").wait_for()
                assert "Notes with vectors" in page.locator("section[data-section=embeddings]").inner_text()
                sizes[f"status-{scheme}-{width}"] = _save(page, f"status-{scheme}-{width}")

                page.goto(f"{live_server.url}/collections/")
                assert page.get_by_text("team", exact=True).first.is_visible()
                sizes[f"collections-{scheme}-{width}"] = _save(page, f"collections-{scheme}-{width}")
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= width, f"a page is {wide}px wide on a {width}px screen"
        finally:
            context.close()
    too_big = {name: size for name, size in sizes.items() if size > MAX_BYTES}
    assert too_big == {}, f"screenshots over {MAX_BYTES} bytes: {too_big}"


def test_the_help_link_opens_the_docs_served_by_pmd_with_their_scripts_running(
    live_server, make_user, chromium, tmp_path, settings
):
    """The built docs under /help/: no script refused by the page policy, the theme's search works."""
    import subprocess
    import sys

    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--site-dir", str(site), "--config-file", str(ROOT / "mkdocs.yml")],
        check=True,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1"},
    )
    settings.PMD_HELP_DIR = str(site)
    make_user("ana")
    context, page = _signed_in(chromium, live_server, "light", 1280)
    refused = []
    page.on("console", lambda message: refused.append(message.text) if message.type == "error" else None)
    try:
        page.click("a:has-text('Help')")
        page.wait_for_url(f"{live_server.url}/help/")
        page.locator("h1").first.wait_for()
        assert page.locator("h1").first.inner_text().startswith("pmd")
        page.fill("input[data-md-component='search-query']", "Claude Desktop")
        page.locator(".md-search-result__item").first.wait_for()
        assert "MCP" in page.locator(".md-search-result").inner_text()
        _save(page, "help-search")
    finally:
        context.close()
    assert refused == []
