"""Web rendering is bounded whatever the note: a huge note is shown in parts,
its tags and frontmatter capped; results pages cap tag facets and the tags on each card; related
notes consider a bounded number of tags and links. Asserted on the pages, never on time."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from indexing.access import Access
from indexing.services.collections import collection_create
from indexing.services.scanning import collection_index
from pmd_site.web.rendering import PART_CHARS, PART_LINES
from pmd_site.web.views.documents import TAGS_SHOWN
from pmd_site.web.views.search import CARD_TAGS_SHOWN, FACETS_SHOWN
from search.retrieval.related import MAX_TAG_LOOKUPS, MAX_TAGS_CONSIDERED, related_notes

pytestmark = pytest.mark.django_db

HEADINGS = 100_000


@pytest.fixture(scope="module")
def vault(django_db_setup, django_db_blocker, tmp_path_factory):
    """Indexed once for the module (100k headings take a while), committed, removed afterwards."""
    with django_db_blocker.unblock():
        folder = _write_vault(tmp_path_factory.mktemp("bounds") / "vault")
        collection = collection_create(path=folder, name="big")
        collection_index(collection)
        yield folder
        from indexing.models import Content

        hashes = list(collection.documents.values_list("content_id", flat=True))
        # Its keyword index by collection, with the bookkeeping triggers off: every table is keyed by
        # collection, and row by row through the triggers, 100k passages can take minutes to remove.
        with connection.cursor() as cursor:
            cursor.execute("SET session_replication_role = replica")
            for table in ("posting", "passage", "term", "stats"):
                cursor.execute(f"DELETE FROM search_keyword_{table} WHERE collection_id = %s", [collection.pk])
            cursor.execute("SET session_replication_role = DEFAULT")
        collection.delete()
        Content.objects.filter(hash__in=hashes, documents__isnull=True).delete()


def _write_vault(folder):
    folder.mkdir()
    (folder / "headings.md").write_text("".join(f"## Heading {i}\n\nText {i}.\n\n" for i in range(HEADINGS)))
    shared = ", ".join(f"t{i}" for i in range(1, 101))
    for n in range(40):
        own = ", ".join(f"n{n}x{i}" for i in range(20))
        (folder / f"tagged-{n}.md").write_text(f"---\ntags: [{shared}, {own}]\n---\n# Tagged {n}\n\nWords.\n")
    many = ", ".join(f"t{i}" for i in range(1, 3001))
    (folder / "many-tags.md").write_text(f"---\ntags: [{many}]\nkeys: [{many}]\n---\n# Many tags\n\nWords.\n")
    (folder / "short.md").write_text("---\ntags: [a, b]\n---\n# Short\n\nA normal note.\n\n## Part\n\nMore.\n")
    return folder


def _anchors(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'id="L(\d+)"', html)]


def test_a_note_of_100k_headings_is_shown_in_bounded_parts(member_client, vault):
    page = member_client.get("/doc/big/headings.md").content.decode()
    anchors = _anchors(page)
    assert anchors and anchors[0] == 1 and max(anchors) <= PART_LINES
    assert page.count("<h2 data-ls") <= PART_LINES // 4 + 1 < HEADINGS
    assert len(page) < PART_CHARS * 3
    parts = -(-HEADINGS * 4 // PART_LINES)
    assert f"showing part 1 of {parts}" in page and "lines 1–3000 of 400000" in page
    assert 'href="?view=rendered&amp;part=2"' in page and 'href="/raw/big/headings.md"' in page

    second = member_client.get("/doc/big/headings.md?part=2").content.decode()
    assert _anchors(second)[0] == PART_LINES + 1 and max(_anchors(second)) <= 2 * PART_LINES
    assert "← Previous part" in second and f"part={parts}" in second

    # A search hit's line opens the part that holds it (and stays bounded).
    hit = member_client.get("/doc/big/headings.md?line=250001&q=heading").content.decode()
    assert 'id="L250001"' in hit and len(_anchors(hit)) <= PART_LINES

    source = member_client.get("/doc/big/headings.md?view=source&part=3").content.decode()
    numbers = _anchors(source)
    assert numbers[0] == 2 * PART_LINES + 1 and len(numbers) == PART_LINES
    last = member_client.get(f"/doc/big/headings.md?view=source&part={parts + 50}").content.decode()
    assert _anchors(last)[-1] == HEADINGS * 4 and "Next part" not in last


def test_a_normal_note_is_shown_whole(member_client, vault):
    page = member_client.get("/doc/big/short.md").content.decode()
    assert "showing part" not in page and 'id="L4"' in page and 'id="L8"' in page
    assert "#a</a>" in page and "more</span>" not in page


def test_a_note_of_thousands_of_tags_shows_a_bounded_list(member_client, vault):
    page = member_client.get("/doc/big/many-tags.md").content.decode()
    assert page.count('class="tag"') == TAGS_SHOWN and f"and {3000 - TAGS_SHOWN} more" in page
    keys = re.search(r"<dt>keys</dt><dd>(.*?)</dd>", page, re.S).group(1)
    assert len(keys) < 600 and keys.endswith("…")


def test_results_pages_cap_tag_facets_and_card_tags(member_client, vault):
    page = member_client.get("/?q=tag:t1").content.decode()
    facets = re.findall(r'class="tag facet[^"]*"[^>]*data-tag="([^"]+)"', page)
    assert len(facets) == FACETS_SHOWN and "t1" in facets
    more = re.search(r"and (\d+) more tags", page)
    assert more and int(more.group(1)) >= 100 + 19 * 20 - FACETS_SHOWN  # of the 20 notes shown, 19+ tagged-N
    cards = re.findall(r'<li class="result".*?</li>', page, re.S)
    assert len(cards) == 20  # the web page's limit
    for card in cards:
        tags = re.findall(r'data-tag="([^"]+)"', card)
        assert len(tags) == CARD_TAGS_SHOWN and tags[0] == "t1" and "more</span>" in card
    assert len(page) < 400_000


def test_related_notes_consider_a_bounded_number_of_tags(vault):
    with CaptureQueriesContext(connection) as queries:
        related = related_notes("pmd://big/many-tags.md", access=Access.local_user(), limit=10)
    assert related.results and all(note.shared_tags for note in related.results)
    assert all(len(note.shared_tags) <= MAX_TAGS_CONSIDERED for note in related.results)
    assert len(queries) <= MAX_TAG_LOOKUPS + 15
    # A note's own tags no other note carries are passed over (tags are stored sorted: n0x… first).
    with CaptureQueriesContext(connection) as queries:
        tagged = related_notes("pmd://big/tagged-0.md", access=Access.local_user(), limit=10)
    assert [len(note.shared_tags) for note in tagged.results] == [MAX_TAGS_CONSIDERED] * 10
    assert len(queries) <= MAX_TAG_LOOKUPS + 15
