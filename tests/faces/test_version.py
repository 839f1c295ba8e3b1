"""One version, named in pyproject.toml, said alike by the command line, the web footer and /api/status."""

from __future__ import annotations

import tomllib

import pytest
from django.test import Client

from pmd_site.version import VERSION
from tests.support.paths import ROOT


def test_a_checkout_reports_the_version_pyproject_names():
    with open(ROOT / "pyproject.toml", "rb") as handle:
        assert VERSION == tomllib.load(handle)["project"]["version"]


def test_pmd_version_prints_it(capsys):
    from pmd_site.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out == f"pmd {VERSION}\n"


@pytest.mark.django_db
def test_a_member_sees_the_version_in_the_footer_and_in_api_status(member):
    client = Client()
    client.force_login(member)
    assert f'<footer class="sitefooter">pmd {VERSION}</footer>' in client.get("/").content.decode()
    assert client.get("/api/status", {"section": ["pmd"]}).json() == {"pmd": {"ok": True, "version": VERSION}}


def test_the_sign_in_page_shows_the_version_too(db):
    assert f"pmd {VERSION}</footer>" in Client().get("/accounts/login/").content.decode()
