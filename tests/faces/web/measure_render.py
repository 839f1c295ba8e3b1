"""Page time and size on the heavy notes of test_web_bounds.py (not a test: run it by name).

    .venv/bin/python -m pytest -q -s -p no:cacheprovider tests/faces/web/measure_render.py

A note of 100k headings; 300 notes of 2,000 shared tags each (plus 100 of their own) searched
with `tag:t1`; a note of 10,000 tags whose related notes are asked for. Prints one line per case.
"""

from __future__ import annotations

import time

import pytest
from django.test import Client

from indexing.services.collections import collection_create
from indexing.services.scanning import collection_index
from tests.support.factories import api_client, make_user

pytestmark = pytest.mark.django_db

SHARED_TAGS = 2000
TAGGED_NOTES = 300
MANY_TAGS = 10_000


def _vault(folder):
    folder.mkdir()
    (folder / "headings.md").write_text("".join(f"## Heading {i}\n\nText {i}.\n\n" for i in range(100_000)))
    shared = ", ".join(f"t{i}" for i in range(1, SHARED_TAGS + 1))
    for n in range(TAGGED_NOTES):
        own = ", ".join(f"n{n}x{i}" for i in range(100))
        (folder / f"tagged-{n}.md").write_text(f"---\ntags: [{shared}, {own}]\n---\n# Tagged {n}\n\nWords.\n")
    many = ", ".join(f"t{i}" for i in range(1, MANY_TAGS + 1))
    (folder / "many-tags.md").write_text(f"---\ntags: [{many}]\n---\n# Many tags\n\nWords.\n")


def _measure(client, url: str, **headers) -> str:
    started = time.perf_counter()
    response = client.get(url, **headers)
    seconds = time.perf_counter() - started
    body = response.content
    return f"{url:<45} {response.status_code} {seconds:7.2f} s {len(body) / 1e6:8.2f} MB"


def test_measure(tmp_path):
    _vault(tmp_path / "vault")
    collection_index(collection_create(path=tmp_path / "vault", name="big"))
    user = make_user("m", password="correct horse battery")
    web = Client()
    web.force_login(user)
    api = api_client(user, write=False)
    lines = [
        _measure(web, "/doc/big/headings.md"),
        _measure(web, "/doc/big/headings.md?view=source"),
        _measure(web, "/?q=tag:t1"),
        _measure(web, "/doc/big/many-tags.md"),
        _measure(web, "/related/big/many-tags.md"),
        _measure(api, "/api/related?ref=pmd://big/many-tags.md"),
    ]
    print("\n" + "\n".join(lines))
