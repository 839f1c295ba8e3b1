"""The digest of saved searches (issue 31, item 4): new matches POSTed to a saved search's webhook (a
real local HTTP server here) and emailed to its owner only when email is configured, from the beat task."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from indexing.access import Access
from indexing.errors import InvalidSearchInput
from indexing.services.saved_searches import saved_search_add
from tests.support.factories import make_user, make_vault


class _Receiver(BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Receiver.received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def receiver():
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook"
    server.shutdown()
    server.server_close()


def test_new_matches_go_to_the_webhook_and_by_email_when_configured(db, tmp_path, receiver, settings, mailoutbox):
    from pmd_site.tasks import saved_digest

    settings.PMD_DIGEST_PRIVATE_WEBHOOKS = True
    folder = tmp_path / "v"
    collection = make_vault(folder, {"a.md": "# Alpha\n\npostgres vacuum\n"}, name="dig")
    ana = make_user("ana", email="ana@example.org")
    saved_search_add(access=Access.for_user(ana), name="vacuum", query="vacuum", webhook_url=receiver,
                     email_digest=True)
    _Receiver.received.clear()
    assert saved_digest() == {"vacuum": {"new": 0}}  # the first digest starts from what exists
    (folder / "b.md").write_text("# Beta\n\nvacuum freeze\n")
    from indexing.services.scanning import collection_index

    collection_index(collection)
    assert saved_digest() == {"vacuum": {"new": 1, "webhook": None}}  # no email server: no email
    assert [(d["saved_search"], [n["uri"] for n in d["new"]]) for d in _Receiver.received] == [
        ("vacuum", ["pmd://dig/b.md"])]
    assert not mailoutbox
    assert saved_digest() == {"vacuum": {"new": 0}}  # nothing new since

    settings.EMAIL_HOST = "smtp.example.org"
    (folder / "c.md").write_text("# Gamma\n\nvacuum analyze\n")
    collection_index(collection)
    assert saved_digest() == {"vacuum": {"new": 1, "webhook": None, "email": None}}
    assert mailoutbox[0].to == ["ana@example.org"] and "pmd://dig/c.md" in mailoutbox[0].body


def test_a_webhook_must_be_http_and_public_unless_allowed(db, settings):
    ana = make_user("ana")
    with pytest.raises(InvalidSearchInput):
        saved_search_add(access=Access.for_user(ana), name="x", query="x", webhook_url="file:///etc/passwd")
    settings.PMD_DIGEST_PRIVATE_WEBHOOKS = False
    with pytest.raises(InvalidSearchInput):
        saved_search_add(access=Access.for_user(ana), name="y", query="y", webhook_url="http://127.0.0.1:9/hook")


class _Redirector(BaseHTTPRequestHandler):
    followed: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        if self.path == "/hook":
            self.send_response(307)
            self.send_header("Location", "/inside")
            self.end_headers()
        else:
            _Redirector.followed.append(self.path)
            self.send_response(204)
            self.end_headers()

    def log_message(self, *args):
        pass


def test_a_webhook_that_redirects_is_not_followed(settings):
    """A public address could redirect the digest to a private one: the redirect is a failure."""
    from indexing.services.notify import webhook_post

    settings.PMD_DIGEST_PRIVATE_WEBHOOKS = True  # the test server is on loopback
    server = HTTPServer(("127.0.0.1", 0), _Redirector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        outcome = webhook_post(f"http://127.0.0.1:{server.server_port}/hook", {"new": []})
    finally:
        server.shutdown()
        server.server_close()
    assert outcome == "HTTP 307" and _Redirector.followed == []


def test_a_search_saved_through_a_limited_token_keeps_its_limit_in_digests_and_runs(db, tmp_path, receiver, settings):
    """alice sees `pub` and her private `secret`; a search she saves through a token limited to `pub`
    never sends, nor shows, a note of `secret`: not in its digest, not when she runs it from the
    browser, not after she changes it through a token that is not limited; a token limited to
    other collections narrows it further, never widens it."""
    from indexing.services.scanning import collection_index
    from pmd_site.tasks import saved_digest
    from tests.support.factories import api_client, web_client

    settings.PMD_DIGEST_PRIVATE_WEBHOOKS = True  # the receiver is on loopback
    alice = make_user("alice")
    pub = make_vault(tmp_path / "pub", {"a.md": "# A\n\nnothing yet\n"}, name="pub")
    secret = make_vault(tmp_path / "secret", {"s.md": "# S\n\nnothing here\n"}, name="secret", owner=alice,
                        visibility="private")
    limited = api_client(alice, collections=["pub"])
    made = limited.post("/api/saved", {"name": "exfil", "query": "violetmongoose", "webhook_url": receiver},
                        content_type="application/json")
    assert made.status_code == 201, made.content
    _Receiver.received.clear()
    assert saved_digest() == {"exfil": {"new": 0}}

    for path, collection in [(tmp_path / "pub" / "new.md", pub), (tmp_path / "secret" / "newest2.md", secret)]:
        path.write_text("# New\n\nvioletmongoose sighted\n")
        collection_index(collection)
    assert saved_digest() == {"exfil": {"new": 1, "webhook": None}}
    assert [n["uri"] for d in _Receiver.received for n in d["new"]] == ["pmd://pub/new.md"]

    ran = web_client(alice).get("/saved/exfil/").content.decode()
    assert "new.md" in ran and "newest2.md" not in ran

    unlimited = api_client(alice)
    assert unlimited.patch("/api/saved/exfil", {"email_digest": False},
                           content_type="application/json").status_code == 200
    ran = unlimited.post("/api/saved/exfil/run").json()
    assert [r["uri"] for r in ran["results"]] == ["pmd://pub/new.md"]

    other = api_client(alice, collections=["secret"])
    assert other.patch("/api/saved/exfil", {"webhook_url": receiver},
                       content_type="application/json").status_code == 200
    assert unlimited.post("/api/saved/exfil/run").json()["results"] == []  # pub ∩ secret: nothing
    (tmp_path / "secret" / "newer.md").write_text("# Newer\n\nvioletmongoose again\n")
    collection_index(secret)
    _Receiver.received.clear()
    saved_digest()
    assert _Receiver.received == []
