"""An unreachable database is a 503 with Retry-After on every face, and requests recover by themselves.

In-process: the test database's connections are pointed at a folder with no server socket in it
(what a killed PostgreSQL leaves behind), then back. tests/system/test_up.py kills the real server under
`pmd up` for the whole story (restart, pooled connections replaced).
"""

from __future__ import annotations

import json
import time

import anyio
import httpx
import pytest
from django.test import Client

from indexing.access import Access
from indexing.services.tokens import token_create
from tests.support.factories import api_client, make_user

# The requests run on other threads (ASGI), so the data they read must be committed.
pytestmark = pytest.mark.django_db(transaction=True)

RECOVERY_TIMEOUT = 30.0


class DatabaseSwitch:
    """Makes every connection of this process (all threads share the settings) reach no server, and back."""

    def __init__(self, empty_folder):
        from django.db import connections

        self.connections = connections
        self.settings = connections["default"].settings_dict
        self.real_host = self.settings["HOST"]
        self.empty_folder = str(empty_folder)

    def kill(self) -> None:
        self.connections.close_all()
        self.settings["HOST"] = self.empty_folder

    def revive(self) -> None:
        self.settings["HOST"] = self.real_host
        self.connections.close_all()


@pytest.fixture
def database(tmp_path):
    switch = DatabaseSwitch(tmp_path)
    yield switch
    switch.revive()
    # Leave no "database down" answer behind for the next test (anonymous: 401 once it is back).
    deadline = time.monotonic() + RECOVERY_TIMEOUT
    while Client().get("/api/collections").status_code == 503:
        assert time.monotonic() < deadline, "the database never came back"
        time.sleep(0.1)
    with switch.connections["default"].cursor() as cursor:  # connections held by the server's threads
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


def _wait_for_status(get, status: int) -> object:
    deadline = time.monotonic() + RECOVERY_TIMEOUT
    while True:
        response = get()
        if response.status_code == status:
            return response
        assert time.monotonic() < deadline, f"still {response.status_code} after {RECOVERY_TIMEOUT:.0f}s"
        assert response.status_code == 503, response.content
        time.sleep(0.2)


def _assert_api_503(response) -> None:
    assert response.status_code == 503
    assert response["Retry-After"].isdigit()
    body = json.loads(response.content)
    assert body["message"] == "the database is not reachable right now; retry in a few seconds"


def _assert_web_503(page, *, reloads: bool) -> None:
    assert page.status_code == 503 and page["Retry-After"].isdigit()
    assert page["Content-Type"].startswith("text/html")
    assert b"The database is not reachable right now" in page.content
    assert (b'http-equiv="refresh"' in page.content) is reloads  # a GET page tries again by itself


def test_api_and_web_answer_503_while_the_database_is_away_and_recover(django_user_model, database):
    user = make_user("reader", staff=True)
    api = api_client(user)
    web = Client()
    web.force_login(user)
    assert api.get("/api/collections").status_code == 200
    assert web.get("/").status_code == 200

    # The API face first: the token lookup fails inside django-ninja, which hands the error to Django.
    database.kill()
    for _ in range(2):  # the failure finds the server gone; then requests are answered without trying it
        _assert_api_503(api.get("/api/collections"))
        _assert_web_503(web.get("/"), reloads=True)
    # Static files (the 503 page's stylesheet) need no database; /healthz keeps its own report.
    assert web.get("/static/pmd/pmd.css").status_code == 200
    health = web.get("/healthz")
    assert health.status_code == 503 and json.loads(health.content)["database"] is False
    database.revive()
    _wait_for_status(lambda: api.get("/api/collections"), 200)

    # The web face first: the session lookup fails in a view.
    database.kill()
    _assert_web_503(web.post("/collections/add/", {"name": "x", "path": "/nowhere"}), reloads=False)
    _assert_web_503(web.get("/status/"), reloads=True)
    _assert_api_503(api.get("/api/collections"))
    database.revive()
    _wait_for_status(lambda: web.get("/"), 200)
    assert api.get("/api/collections").status_code == 200


def test_mcp_answers_json_503_while_the_database_is_away(django_user_model, database):
    from pmd_site.asgi import application

    user = make_user("agent")
    headers = {
        "Authorization": f"Bearer {token_create(user=user, access=Access.local_user(), can_write=True).raw}",
        "Accept": "application/json, text/event-stream",
        "Host": "127.0.0.1",
    }

    def call(method: str) -> httpx.Response:
        async def go():
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=application), base_url="http://127.0.0.1"
            ) as client:
                return await client.request(
                    method, "/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
                )

        return anyio.run(go)

    database.kill()
    for _ in range(2):  # the authentication query fails, then the known-down answer
        response = call("POST")
        assert response.status_code == 503
        assert response.headers["retry-after"].isdigit()
        assert response.json()["message"] == "the database is not reachable right now; retry in a few seconds"
    database.revive()
    # Authenticated again: a GET gets as far as "no event stream here".
    _wait_for_status(lambda: call("GET"), 405)


@pytest.fixture
def pooled_connections():
    """The web server's database settings (PMD_DB_POOL): a connection pool, no per-checkout health check."""
    from django.db import connections

    wrapper = connections["default"]
    settings = wrapper.settings_dict
    saved = {key: settings[key] for key in ("CONN_MAX_AGE", "CONN_HEALTH_CHECKS", "OPTIONS")}
    connections.close_all()
    settings.update(
        CONN_MAX_AGE=0,
        CONN_HEALTH_CHECKS=False,
        OPTIONS={**settings["OPTIONS"], "pool": {"min_size": 4, "max_size": 8, "timeout": 10}},
    )
    yield wrapper
    connections.close_all()
    wrapper.close_pool()
    settings.update(saved)


def _asgi_get(path: str, headers: dict | None = None) -> int:
    """One request through the ASGI application, like the web server's (connections go back to the pool)."""
    from pmd_site.asgi import application

    async def go():
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=application), base_url="http://127.0.0.1"
        ) as client:
            return (await client.get(path, headers=headers or {})).status_code

    return anyio.run(go)


def _cut_every_connection_but_this_one(wrapper) -> None:
    """What a server restart looks like to a connection pool: each connection it holds is dead."""
    with wrapper.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    wrapper.close()


def _until_200(path: str, headers: dict | None = None) -> list[int]:
    statuses = []
    deadline = time.monotonic() + RECOVERY_TIMEOUT
    while not statuses or statuses[-1] != 200:
        assert time.monotonic() < deadline, statuses
        statuses.append(_asgi_get(path, headers))
    return statuses


def test_pooled_connections_to_a_restarted_server_are_replaced_at_once(django_user_model, pooled_connections):
    user = make_user("reader")
    auth = {"Authorization": f"Bearer {token_create(user=user, access=Access.local_user(), can_write=True).raw}"}
    assert _asgi_get("/api/collections", auth) == 200
    pool = pooled_connections.pool
    deadline = time.monotonic() + RECOVERY_TIMEOUT
    while pool.get_stats()["pool_available"] < 4:  # the pool fills up to min_size in the background
        assert time.monotonic() < deadline
        time.sleep(0.05)

    # Four dead connections in the pool: one request finds out, the pool is replaced, the next one works.
    _cut_every_connection_but_this_one(pooled_connections)
    assert _until_200("/api/collections", auth) == [503, 200]
    # /healthz as well (it answers in its own format, but heals the pool the same way).
    deadline = time.monotonic() + RECOVERY_TIMEOUT
    while pooled_connections.pool.get_stats()["pool_available"] < 4:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    _cut_every_connection_but_this_one(pooled_connections)
    assert _until_200("/healthz") == [503, 200]
