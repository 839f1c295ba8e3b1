"""Every pmd page (the admin aside) on a phone and on a desktop: nothing scrolls sideways at 390 px,
and axe-core (tests/support/axe, installed by scripts/bootstrap) finds nothing serious at either
width. Read from an Obsidian-help style vault with a long unbreakable line, code, a table."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.browser.conftest import _skip_loudly

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HELP = Path(__file__).resolve().parents[1] / "fixtures" / "real_vaults" / "help"
AXE = Path(__file__).resolve().parents[1] / "support" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 860}

# (name, address) of every page a signed-in person reaches; "signed out" pages after them.
PAGES = [
    ("search", "/"),
    ("results", "/?q=readable+line+length"),
    ("results-code", "/?q=max-width"),
    ("document", "/doc/help/Appearance.md?q=readable"),
    ("document-embed", "/doc/help/CSS%20snippets.md"),
    ("collections", "/collections/"),
    ("status", "/status/"),
    ("searches", "/status/searches/"),
    ("history", "/history/?q=readable"),
    ("saved", "/saved/"),
    ("saved-run", "/saved/looks/"),
    ("ask", "/?q=what+is+readable+line+length&mode=ask"),
    ("tokens", "/tokens/"),
]
SIGNED_OUT = [("sign-in", "/accounts/login/"), ("password-reset", "/accounts/password_reset/")]


@pytest.fixture
def site(tmp_path, make_user):
    """The help vault (a git repository, for History) indexed, a saved search, a staff user."""
    from indexing.access import Access
    from indexing.services.refresh import collection_add
    from indexing.services.saved_searches import saved_search_add

    folder = tmp_path / "help"
    shutil.copytree(HELP, folder)
    git = ["git", "-C", str(folder), "-c", "user.name=Ana", "-c", "user.email=ana@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "Readable line length, explained"], check=True)
    collection_add(path=folder, name="help", access=Access.local_user())
    user = make_user("ana", staff=True)
    saved_search_add(access=Access.for_user(user), name="looks", query="readable", mode="keyword")
    return folder


def _pages(live_server, login, *, viewport):
    """Each page, opened at `viewport`: (name, page) once it has loaded (results and answers in)."""
    page = login("ana")
    page.set_viewport_size(viewport)
    for name, address in PAGES:
        page.goto(f"{live_server.url}{address}")
        page.wait_for_load_state("networkidle")
        yield name, page
    page.context.clear_cookies()
    for name, address in SIGNED_OUT:
        page.goto(f"{live_server.url}{address}")
        yield name, page


def test_no_page_scrolls_sideways_on_a_phone(live_server, site, login, shot):
    wide = {}
    for name, page in _pages(live_server, login, viewport=PHONE):
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > PHONE["width"]:
            wide[name] = width
        shot(page, f"every-page-390-{name}")
    assert not wide, f"pages wider than a {PHONE['width']} px screen: {wide}"


def test_the_document_side_panel_stays_inside_a_desktop_screen(live_server, site, login, shot):
    page = login("ana")
    page.goto(f"{live_server.url}/doc/help/Appearance.md?q=readable")
    assert page.evaluate("document.documentElement.scrollWidth") <= DESKTOP["width"]
    panel = page.locator("aside").first
    box = panel.bounding_box()
    assert box is not None and box["x"] + box["width"] <= DESKTOP["width"], box
    # its longest value (a frontmatter address without a space) wraps inside it
    assert panel.evaluate("e => e.scrollWidth <= e.clientWidth")
    assert "bbbbbbbb" in panel.inner_text()
    shot(page, "every-page-1280-document")


def test_axe_finds_nothing_serious_on_any_page(live_server, site, login, shot):
    if not AXE.is_file():
        _skip_loudly(f"no axe-core at {AXE}: `npm ci` in tests/support/axe (scripts/bootstrap does)")
    source = AXE.read_text()
    found = {}
    for viewport in (DESKTOP, PHONE):
        for name, page in _pages(live_server, login, viewport=viewport):
            page.evaluate(source)  # run by the browser's debugger: the page's CSP does not apply
            violations = page.evaluate(
                "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
                ".filter(v => v.impact === 'serious' || v.impact === 'critical')"
                ".map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ')).slice(0, 3).join(', '))"
            )
            if violations:
                found[f"{name} at {viewport['width']} px"] = violations
            if viewport is DESKTOP:
                shot(page, f"every-page-1280-{name}")
    assert not found, "\n".join(f"{page}: {v}" for page, v in found.items())
