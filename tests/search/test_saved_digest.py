"""The digest of saved searches: new matches POSTed to a saved search's webhook (a
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

    def do_POST(self):  # http.server's name
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
    saved_search_add(
        access=Access.for_user(ana), name="vacuum", query="vacuum", webhook_url=receiver, email_digest=True
    )
    _Receiver.received.clear()
    assert saved_digest() == {"vacuum": {"new": 0}}  # the first digest starts from what exists
    (folder / "b.md").write_text("# Beta\n\nvacuum freeze\n")
    from indexing.services.scanning import collection_index

    collection_index(collection)
    assert saved_digest() == {"vacuum": {"new": 1, "webhook": None}}  # no email server: no email
    assert [(d["saved_search"], [n["uri"] for n in d["new"]]) for d in _Receiver.received] == [
        ("vacuum", ["pmd://dig/b.md"])
    ]
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

    def do_POST(self):  # http.server's name
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


def test_a_webhook_whose_name_does_not_resolve_is_refused_when_saved_and_skipped_when_sent(db, settings, caplog):
    """Unknown when saved is not "checked later": a name that resolves to nothing is refused, and one
    that stops resolving after it was saved is a failed delivery, with a warning, and no request."""
    from indexing.services.notify import webhook_post

    ana = make_user("ana")
    for private_allowed in (False, True):
        settings.PMD_DIGEST_PRIVATE_WEBHOOKS = private_allowed
        with pytest.raises(InvalidSearchInput, match="does not resolve"):
            saved_search_add(
                access=Access.for_user(ana), name="x", query="x", webhook_url="https://nowhere.invalid/hook"
            )
    outcome = webhook_post("https://nowhere.invalid/hook", {"new": []})
    assert outcome == "the webhook's host nowhere.invalid does not resolve to an address"
    assert any(r.levelname == "WARNING" and "nowhere.invalid" in r.getMessage() for r in caplog.records)


def test_a_webhook_connects_to_the_public_address_that_was_checked_not_a_later_answer(settings, monkeypatch):
    """DNS rebinding: the name answers a public address when checked and loopback afterwards; the
    delivery connects to the checked address (refused here, so nothing leaves the machine)."""
    import socket

    from indexing.services.notify import webhook_post
    from tests.support.resolver import resolve_as

    settings.PMD_DIGEST_PRIVATE_WEBHOOKS = False
    resolve_as(monkeypatch, {"hooks.example.org": ["93.184.215.14", "127.0.0.1"]})
    connected = []

    def create_connection(address, *args, **kwargs):
        connected.append(address)
        raise ConnectionRefusedError("not in a test")

    monkeypatch.setattr(socket, "create_connection", create_connection)
    outcome = webhook_post("http://hooks.example.org:8080/hook", {"new": []})
    assert outcome is not None and connected == [("93.184.215.14", 8080)]


class _Named(BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):  # http.server's name
        self.rfile.read(int(self.headers["Content-Length"]))
        _Named.received.append((self.server.server_address[0], self.headers["Host"], self.path))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def _serving(address: str, port: int = 0, tls=None) -> HTTPServer:
    server = HTTPServer((address, port), _Named)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_webhook_is_delivered_to_the_checked_address_with_its_name_as_host(settings, monkeypatch):
    """Two receivers on one port, 127.0.0.2 (the answer checked) and 127.0.0.1 (the answer after):
    only the first gets the digest, addressed to the webhook's name."""
    from indexing.services.notify import webhook_post
    from tests.support.resolver import resolve_as

    settings.PMD_DIGEST_PRIVATE_WEBHOOKS = True  # the receivers are on loopback
    checked = _serving("127.0.0.2")
    port = checked.server_port
    later = _serving("127.0.0.1", port)
    resolve_as(monkeypatch, {"hooks.example.org": ["127.0.0.2", "127.0.0.1"]})
    _Named.received.clear()
    try:
        outcome = webhook_post(f"http://hooks.example.org:{port}/hook?t=1", {"new": []})
    finally:
        for server in (checked, later):
            server.shutdown()
            server.server_close()
    assert outcome is None and _Named.received == [("127.0.0.2", f"hooks.example.org:{port}", "/hook?t=1")]


def _certificate(tmp_path, name: str):
    """A self-signed certificate for `name`: its files (certificate, key)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


@pytest.mark.parametrize(("served_as", "delivered"), [("hooks.example.org", True), ("other.example.org", False)])
def test_an_https_webhook_verifies_the_certificate_for_its_name_not_the_address(
    settings, monkeypatch, tmp_path, served_as, delivered
):
    """Connecting to the checked address keeps https honest: the server is asked for, and its
    certificate verified against, the webhook's name; a certificate for another name is refused."""
    import ssl

    import certifi

    from indexing.services.notify import webhook_post
    from tests.support.resolver import resolve_as

    settings.PMD_DIGEST_PRIVATE_WEBHOOKS = True  # the receiver is on loopback
    cert_file, key_file = _certificate(tmp_path, served_as)
    monkeypatch.setattr(certifi, "where", lambda: str(cert_file))  # the one authority trusted
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert_file, key_file)
    asked_for = []
    tls.sni_callback = lambda sock, name, context: asked_for.append(name)
    server = _serving("127.0.0.1", tls=tls)
    resolve_as(monkeypatch, {"hooks.example.org": "127.0.0.1"})
    _Named.received.clear()
    try:
        outcome = webhook_post(f"https://hooks.example.org:{server.server_port}/hook", {"new": []})
    finally:
        server.shutdown()
        server.server_close()
    assert asked_for == ["hooks.example.org"]
    if delivered:
        assert outcome is None and [host for _, host, _ in _Named.received] == [
            f"hooks.example.org:{server.server_port}"
        ]
    else:
        assert "certificate" in outcome.lower() and _Named.received == []


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
    secret = make_vault(
        tmp_path / "secret", {"s.md": "# S\n\nnothing here\n"}, name="secret", owner=alice, visibility="private"
    )
    limited = api_client(alice, collections=["pub"])
    made = limited.post(
        "/api/saved",
        {"name": "exfil", "query": "violetmongoose", "webhook_url": receiver},
        content_type="application/json",
    )
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
    assert (
        unlimited.patch("/api/saved/exfil", {"email_digest": False}, content_type="application/json").status_code == 200
    )
    ran = unlimited.post("/api/saved/exfil/run").json()
    assert [r["uri"] for r in ran["results"]] == ["pmd://pub/new.md"]

    other = api_client(alice, collections=["secret"])
    assert (
        other.patch("/api/saved/exfil", {"webhook_url": receiver}, content_type="application/json").status_code == 200
    )
    assert unlimited.post("/api/saved/exfil/run").json()["results"] == []  # pub ∩ secret: nothing
    (tmp_path / "secret" / "newer.md").write_text("# Newer\n\nvioletmongoose again\n")
    collection_index(secret)
    _Receiver.received.clear()
    saved_digest()
    assert _Receiver.received == []
