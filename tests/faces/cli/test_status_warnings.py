"""`pmd status` warns about unsafe settings it can see."""

from __future__ import annotations

import json
import os
import secrets

import pytest

SAFE_KEY = secrets.token_urlsafe(60)


@pytest.fixture
def safe_settings(settings):
    """Safe values; PMD_HOME stays the session's (its database lives there), its mode restored after."""
    home = settings.PMD_HOME
    mode = os.stat(home).st_mode
    settings.DEBUG = False
    settings.SECRET_KEY = SAFE_KEY
    settings.ALLOWED_HOSTS = ["localhost"]
    os.chmod(home, mode & ~0o007)
    yield settings
    os.chmod(home, mode)


def _security(run_cli) -> dict:
    code, out, err = run_cli("status", "--json")
    assert code == 0, err
    return json.loads(out)["security"]


@pytest.mark.django_db
def test_safe_settings_give_no_warning(safe_settings, run_cli):
    section = _security(run_cli)
    assert section["ok"] is True and section["warnings"] == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda s: setattr(s, "DEBUG", True), "PMD_DEBUG is on"),
        (lambda s: setattr(s, "SECRET_KEY", "test-only-secret-key-not-for-production"), "placeholder"),
        (lambda s: setattr(s, "SECRET_KEY", "abc123"), "short"),
        (lambda s: setattr(s, "ALLOWED_HOSTS", []), "PMD_ALLOWED_HOSTS is empty"),
        (lambda s: setattr(s, "ALLOWED_HOSTS", ["*"]), "'*'"),
    ],
)
def test_each_unsafe_setting_is_named(safe_settings, run_cli, change, expected):
    change(safe_settings)
    section = _security(run_cli)
    assert section["ok"] is False
    assert any(expected in warning for warning in section["warnings"]), section


@pytest.mark.django_db
def test_a_pmd_home_made_by_the_user_and_open_to_others_is_named(safe_settings, run_cli):
    """pmd tightens the folders it created itself on each start; a folder the user made it only names."""
    from pmd_site.runtime.server_files import HOME_MARKER

    marker = safe_settings.PMD_HOME / HOME_MARKER
    text = marker.read_text()
    marker.unlink()
    os.chmod(safe_settings.PMD_HOME, 0o755)
    try:
        section = _security(run_cli)
    finally:
        marker.write_text(text)
    assert any("open to other users" in warning for warning in section["warnings"]), section


@pytest.mark.django_db
def test_a_readable_secret_file_is_named(safe_settings, run_cli):
    secret = safe_settings.PMD_HOME / "secret_key"
    existed = secret.exists()
    if not existed:
        secret.write_text("x" * 60)
    mode = secret.stat().st_mode
    secret.chmod(0o644)
    try:
        section = _security(run_cli)
    finally:
        secret.chmod(mode) if existed else secret.unlink()
    assert any(str(secret) in warning for warning in section["warnings"])


@pytest.mark.django_db
def test_plain_status_prints_the_warnings(safe_settings, run_cli):
    safe_settings.DEBUG = True
    code, out, err = run_cli("status")
    assert code == 0
    assert "PMD_DEBUG is on" in out + err
