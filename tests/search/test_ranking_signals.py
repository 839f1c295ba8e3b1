"""Optional hybrid ranking signals from the notes' structure (search.pipeline.signals): a note
linked to or from a better hit moves up with a link boost, a recent note with a recency boost;
both off by default, and neither brings in a note the searcher may not see."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from indexing.access import Access
from search.request import Mode, SearchRequest
from tests.support.factories import make_user, write_notes

pytestmark = pytest.mark.django_db

RECENT = (timezone.now() - timedelta(days=2)).date().isoformat()

VAULT = {
    # the runbook answers the query; it points to the rollback checklist, which says less about it
    "runbook.md": "# Deploy runbook\n\nKubernetes rollout of the api: kubectl rollout, canary rollout, "
    "rollout status, then [[rollback]] if the rollout fails.\n",
    "rollback.md": "# Rollback checklist\n\nUndo a bad rollout: pin the previous image and page the owner.\n",
    # says the words as often as the checklist, and a bit more, but is about something else
    "garden.md": "# Garden\n\nThe rollout of spring bulbs, a rollout of new beds; tulips first.\n",
    # the same minutes twice: an old copy with one more mention, and this week's
    "old-minutes.md": "---\ndate: 2021-03-01\n---\n# Standup minutes\n\nBudget review, budget numbers, "
    "budget owners, budget.\n",
    "new-minutes.md": f"---\ndate: {RECENT}\n---\n# Standup minutes\n\nBudget review, budget numbers, budget owners.\n",
    **{
        f"misc-{n}.md": f"# Misc {n}\n\nOne line on the budget among notes on lunch, travel, desks and chairs {n}.\n"
        for n in range(1, 7)
    },
}


@pytest.fixture
def vault(tmp_path, ollama, settings):
    from indexing.services.collections import collection_create
    from indexing.services.embedding import embed_pending
    from indexing.services.scanning import collection_index

    settings.PMD_GENERATE_MODEL = ""
    settings.PMD_RERANK_MODEL = ""
    write_notes(tmp_path, VAULT)
    collection = collection_index(collection_create(path=tmp_path, name="notes"))
    embed_pending()
    return collection


def _order(query: str, access=None, **options) -> list[str]:
    from search.pipeline.dispatch import search_run

    request = SearchRequest(
        query=query,
        mode=Mode.HYBRID,
        access=access or Access.local_user(),
        limit=10,
        expand=False,
        rerank=False,
        **options,
    )
    return [r.path for r in search_run(request).results]


def test_a_link_boost_lifts_the_note_a_better_hit_links_to(vault, settings):
    plain = _order("kubernetes rollout")
    assert plain[0] == "runbook.md"
    assert plain.index("garden.md") < plain.index("rollback.md"), plain  # the fixture: the boost has work to do
    boosted = _order("kubernetes rollout", link_boost=0.5)
    assert boosted[:2] == ["runbook.md", "rollback.md"], boosted
    settings.PMD_LINK_BOOST = 0.5  # the setting does the same; a request's 0 turns it off
    assert _order("kubernetes rollout") == boosted
    assert _order("kubernetes rollout", link_boost=0) == plain


def test_a_recency_boost_lifts_this_weeks_note(vault, settings):
    plain = _order("budget")
    assert plain[:2] == ["old-minutes.md", "new-minutes.md"], plain
    assert _order("budget", recency_boost=0.2)[:2] == ["new-minutes.md", "old-minutes.md"]
    settings.PMD_RECENCY_BOOST = 0.2
    assert _order("budget")[:2] == ["new-minutes.md", "old-minutes.md"]


def test_signals_are_off_by_default_and_leave_order_alone_without_links_or_dates(vault):
    from django.conf import settings

    assert settings.PMD_LINK_BOOST == 0 and settings.PMD_RECENCY_BOOST == 0
    # no links among these hits and one date tier: the boosts change nothing
    assert _order("garden tulips", link_boost=0.5, recency_boost=0.2) == _order("garden tulips")


def test_a_boost_never_shows_a_note_the_member_cannot_see(vault, tmp_path, django_user_model):
    from indexing.models import Collection
    from indexing.services.collections import collection_create
    from indexing.services.embedding import embed_pending
    from indexing.services.scanning import collection_index

    owner = make_user("owner")
    member = make_user("member")
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "rollout-secrets.md").write_text(
        f"---\ndate: {RECENT}\n---\n# Rollout secrets\n\nKubernetes rollout keys, see [[plans]].\n"
    )
    (secret / "plans.md").write_text("# Plans\n\nRollout plans, back to [[rollout-secrets]].\n")
    collection_index(
        collection_create(path=secret, name="secret", owner=owner, visibility=Collection.Visibility.PRIVATE)
    )
    embed_pending()
    assert "rollout-secrets.md" in _order("kubernetes rollout", link_boost=0.5, recency_boost=0.2)  # can fail
    seen = _order("kubernetes rollout", access=Access.for_user(member), link_boost=0.5, recency_boost=0.2)
    assert seen and not {"rollout-secrets.md", "plans.md"} & set(seen)
