"""/help/: the documentation site served by pmd from its built copy, behind the sign-in, with the
page policy allowing only the site's own inline scripts; without a built site, how to build one."""

from __future__ import annotations

import base64
import hashlib
import re
import subprocess
import sys
import tomllib

import pytest
from django.test import Client

from tests.support.paths import ROOT

pytestmark = pytest.mark.django_db

THEME_SCRIPT = b"var palette = localStorage.getItem('palette')"


@pytest.fixture
def built_site(tmp_path, settings):
    site = tmp_path / "site"
    (site / "usage" / "cli").mkdir(parents=True)
    (site / "index.html").write_bytes(
        b"<html><head><script src='assets/app.js'></script><script>" + THEME_SCRIPT + b"</script>"
        b"<script id='__config' type=\"application/json\">{}</script></head><body>pmd docs home</body></html>"
    )
    (site / "usage" / "cli" / "index.html").write_text("<html><body>The command line</body></html>")
    (site / "assets").mkdir()
    (site / "assets" / "app.js").write_text("console.log('theme')")
    (tmp_path / "secret.txt").write_text("not for the web")
    settings.PMD_HELP_DIR = str(site)
    return site


def _sha256(script: bytes) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script).digest()).decode() + "'"


def test_help_serves_the_built_site_with_only_its_own_inline_scripts_allowed(member_client, built_site):
    home = member_client.get("/help/")
    assert home.status_code == 200 and b"pmd docs home" in home.content
    policy = home["Content-Security-Policy"]
    script_src = re.search(r"script-src ([^;]*)", policy).group(1).split()
    assert script_src == ["'self'", _sha256(THEME_SCRIPT)]
    assert "'unsafe-inline'" not in re.search(r"script-src [^;]*", policy).group(0)
    assert "frame-ancestors 'none'" in policy and "object-src 'none'" in policy
    assert b"The command line" in member_client.get("/help/usage/cli/").content
    asset = member_client.get("/help/assets/app.js")
    assert asset.status_code == 200 and b"".join(asset.streaming_content) == b"console.log('theme')"


def test_help_reads_nothing_outside_the_site_and_needs_a_sign_in(member_client, built_site):
    for path in ("/help/../secret.txt", "/help/%2e%2e/secret.txt", "/help/usage/../../secret.txt"):
        answer = member_client.get(path)
        assert answer.status_code == 404, path
        assert b"not for the web" not in (
            answer.content if not answer.streaming else b"".join(answer.streaming_content)
        )
    assert member_client.get("/help/nothing-here.html").status_code == 404
    anonymous = Client().get("/help/")
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]


def test_without_a_built_site_help_says_how_to_build_it_and_shows_members_no_folder(
    member_client, staff_client, tmp_path, settings
):
    settings.PMD_HELP_DIR = str(tmp_path / "not-built")
    member = member_client.get("/help/")
    assert member.status_code == 404
    assert b"./scripts/build-docs" in member.content and b"not-built" not in member.content
    assert b"not-built" in staff_client.get("/help/").content


def test_without_a_built_site_an_installed_pmd_is_told_to_build_from_source_and_set_the_folder(
    member_client, tmp_path, settings
):
    settings.PMD_HELP_DIR = str(tmp_path / "not-built")
    settings.BASE_DIR = tmp_path / "site-packages"  # no mkdocs.yml, no scripts/: a pip install or the image
    answer = member_client.get("/help/")
    assert answer.status_code == 404
    assert b"scripts/" not in answer.content
    assert b"pip install mkdocs-material" in answer.content and b"mkdocs build --site-dir" in answer.content
    assert b"PMD_HELP_DIR" in answer.content and b"compose" in answer.content


def test_scripts_run_installs_the_docs_extra_and_builds_the_help_site():
    run = (ROOT / "scripts" / "run").read_text()
    assert "./scripts/bootstrap embedded,local,formats,docs" in run and "./scripts/build-docs" in run
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    assert any(package.startswith("mkdocs-material") for package in extras["docs"])
    assert "docs" in re.search(r"pmd\[([^\]]*)\]", " ".join(extras["dev"])).group(1).split(",")


def test_build_docs_builds_a_missing_site_and_leaves_a_fresh_one(tmp_path):
    site = tmp_path / "site"
    build = [str(ROOT / "scripts" / "build-docs"), str(site)]
    env = {"PATH": "/usr/bin:/bin", "PYTHON": sys.executable}
    subprocess.run(build, check=True, capture_output=True, env=env)
    assert "pmd" in (site / "index.html").read_text()
    (site / "index.html").write_text("left as it is")  # newer than docs/: fresh
    rerun = subprocess.run(build, check=True, capture_output=True, env=env)
    assert (site / "index.html").read_text() == "left as it is" and rerun.stderr == b""


def test_every_page_links_to_help(member_client):
    assert b'href="/help/">Help</a>' in member_client.get("/").content
    assert b'href="/help/">Help</a>' in member_client.get("/status/").content


def test_the_real_docs_site_is_served_with_its_theme_scripts_allowed(member_client, tmp_path, settings):
    """Built by mkdocs from docs/ as a server would: every inline script of every page is allowed
    by its hash, and the pages load nothing from outside pmd (no web fonts)."""
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--site-dir", str(site), "--config-file", str(ROOT / "mkdocs.yml")],
        check=True,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1"},
    )
    settings.PMD_HELP_DIR = str(site)
    for path in ("/help/", "/help/agents/mcp/", "/help/reference/settings/"):
        answer = member_client.get(path)
        assert answer.status_code == 200, path
        inline = re.findall(
            rb"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>(.*?)</script>", answer.content, re.S
        )
        assert inline, "the theme's inline scripts are what this checks"
        for script in inline:
            assert _sha256(script) in answer["Content-Security-Policy"], path
        assert b"fonts.googleapis.com" not in answer.content
