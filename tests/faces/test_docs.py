"""The documentation: its generated pages match the code, the README stays short and keeps the
set-up commands, and every screenshot a page shows exists (mkdocs build --strict, run by
scripts/test, checks the links and the navigation)."""

from __future__ import annotations

import re

from pmd_site.reference import REGENERATE, generated_files
from tests.support.paths import ROOT

IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)")


def test_the_generated_pages_are_what_the_code_renders_now():
    stale = [
        str(path.relative_to(ROOT))
        for path, text in generated_files().items()
        if not path.exists() or path.read_text() != text
    ]
    assert not stale, f"stale: {', '.join(stale)}; regenerate them all with `{REGENERATE}` and commit the result"


def test_the_reference_pages_name_every_command_and_every_setting():
    from pmd_site.cli import MODULE_OF_COMMAND
    from pmd_site.settings.table import TABLE

    cli = (ROOT / "docs" / "reference" / "cli.md").read_text()
    settings = (ROOT / "docs" / "reference" / "settings.md").read_text()
    assert [name for name in MODULE_OF_COMMAND if f"## pmd {name}\n" not in cli] == []
    assert [s.name for s in TABLE if f"### `{s.name}`\n" not in settings] == []


def test_the_readme_fits_two_screens_and_keeps_the_set_up_commands():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert "./scripts/run ~/notes\n" in readme
    assert "./scripts/test\n" in readme


def test_every_image_the_docs_and_readme_show_exists():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    missing = []
    for page in pages:
        for target in IMAGE.findall(page.read_text()):
            if "://" not in target and not (page.parent / target).resolve().is_file():
                missing.append(f"{page.relative_to(ROOT)}: {target}")
    assert missing == [], (
        "take the screenshots with PMD_DOCS_SCREENSHOTS=1 -m browser tests/browser/test_docs_screenshots.py"
    )
