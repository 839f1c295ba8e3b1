"""The API token and keyword index models moved from the search app to indexing:
an install migrated before the move keeps its tokens, their collections and its keyword index."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE_THE_MOVE = [("indexing", "0010_job_worker_heartbeat"), ("search", "0006_access")]


def _migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection)  # a fresh loader sees what was applied


@pytest.mark.django_db(transaction=True)
def test_rows_written_before_the_move_are_read_through_the_moved_models():
    executor = _migrate(BEFORE_THE_MOVE)
    old = executor.loader.project_state(BEFORE_THE_MOVE).apps
    user = old.get_model("auth", "User").objects.create(username="ada")
    collection = old.get_model("indexing", "Collection").objects.create(name="notes", root_path="/srv/notes")
    token = old.get_model("search", "ApiToken").objects.create(
        user=user, name="laptop", digest="d" * 64, prefix="pmd_abc"
    )
    token.collections.add(collection)
    old.get_model("search", "TokenFailure").objects.create(
        address="192.0.2.1", failures=3, window_start="2026-01-01T00:00Z"
    )

    _migrate(executor.loader.graph.leaf_nodes())

    from indexing.models import ApiToken, TokenFailure

    moved = ApiToken.objects.get(digest="d" * 64)
    assert (moved.name, moved.user.username) == ("laptop", "ada")
    assert list(moved.collections.values_list("name", flat=True)) == ["notes"]
    assert TokenFailure.objects.get(address="192.0.2.1").failures == 3
    with connection.cursor() as cursor:  # the tables kept their names: nothing was copied
        cursor.execute("SELECT count(*) FROM search_apitoken_collections")
        assert cursor.fetchone()[0] == 1


@pytest.mark.django_db(transaction=True)
def test_the_move_can_be_undone():
    executor = _migrate(BEFORE_THE_MOVE)
    assert executor.loader.project_state(BEFORE_THE_MOVE).apps.get_model("search", "ApiToken")
    _migrate(executor.loader.graph.leaf_nodes())
    from indexing.models import KeywordPassage

    assert KeywordPassage._meta.db_table == "search_keyword_passage"


def test_old_admin_links_to_tokens_lead_to_their_new_place(admin_client):
    response = admin_client.get("/admin/search/apitoken/?q=laptop")
    assert response.status_code == 302 and response["Location"] == "/admin/indexing/apitoken/?q=laptop"
    assert admin_client.get(response["Location"]).status_code == 200
