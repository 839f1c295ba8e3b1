"""Hardening: login lockout (django-axes), bearer-token throttling, CSP, self-hosted API docs,
and password reset only where email works."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from datetime import timedelta

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from indexing.access import Access
from indexing.services.tokens import token_create
from tests.support.factories import make_user, web_client
from tests.support.mcp_client import close_other_connections

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"


@pytest.fixture
def alice(db):
    return make_user("alice", email="alice@example.org", password=PASSWORD)


@pytest.fixture
def low_limits(settings):
    """Three failures lock, so tests stay short; the cool-off stays long enough never to pass by itself."""
    settings.AXES_FAILURE_LIMIT = 3
    settings.PMD_TOKEN_FAILURE_LIMIT = 3
    settings.PMD_BEHIND_HTTPS_PROXY = False


def _login(username: str, password: str, *, address: str = "198.51.100.7", path: str = "/accounts/login/", **extra):
    return Client(REMOTE_ADDR=address, **extra).post(path, {"username": username, "password": password})


# --- login lockout --------------------------------------------------------------------------


def test_account_locks_after_limit_even_for_the_right_password_from_elsewhere(alice, low_limits):
    for _ in range(2):
        assert _login("alice", "wrong").status_code == 200  # the form again, with its error
    locked = _login("alice", "wrong")
    assert locked.status_code == 429
    html = locked.content.decode()
    assert "Too many failed logins" in html and "pmd user unlock" in html
    assert "Content-Security-Policy" in locked.headers
    # The account itself is locked: the right password from another address is refused too.
    assert _login("alice", PASSWORD, address="203.0.113.50").status_code == 429
    assert "_auth_user_id" not in Client().session


def test_lockout_page_through_the_asgi_handler(alice, low_limits):
    """The web server runs Django under ASGI, where django-axes takes its async middleware path."""
    from asgiref.sync import async_to_sync
    from django.test import AsyncClient

    post = async_to_sync(AsyncClient().post)
    for _ in range(3):
        response = post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert response.status_code == 429
    assert "Too many failed logins" in response.content.decode()
    assert "Content-Security-Policy" in response.headers
    assert post("/accounts/login/", {"username": "alice", "password": PASSWORD}).status_code == 429


def test_address_locks_across_usernames(alice, low_limits):
    for name in ("root", "admin", "bob"):
        _login(name, "guess", address="192.0.2.66")
    assert _login("alice", PASSWORD, address="192.0.2.66").status_code == 429
    ok = _login("alice", PASSWORD, address="192.0.2.67")
    assert ok.status_code == 302 and ok.url == "/"


def test_admin_login_is_throttled_too(alice, low_limits):
    for _ in range(3):
        response = _login("alice", "wrong", path="/admin/login/?next=/admin/")
    assert response.status_code == 429
    assert "Too many failed logins" in response.content.decode()


def test_forwarded_for_counts_only_from_a_trusted_proxy(alice, low_limits, settings):
    import ipaddress

    # From an address not declared a proxy the header is the client's to forge: it changes nothing.
    settings.PMD_TRUSTED_PROXIES = [ipaddress.ip_network("10.0.0.6")]
    for i, name in enumerate(("root", "admin", "bob")):
        _login(name, "guess", address="10.0.0.5", HTTP_X_FORWARDED_FOR=f"192.0.2.{i}")
    assert _login("carol", "guess", address="10.0.0.5", HTTP_X_FORWARDED_FOR="192.0.2.99").status_code == 429

    # From the proxy, its last entry is the client; entries before it are ignored.
    for name in ("root", "admin", "bob"):
        _login(name, "guess", address="10.0.0.6", HTTP_X_FORWARDED_FOR=f"1.2.3.{len(name)}, 198.51.100.20")
    assert _login("alice", PASSWORD, address="10.0.0.6", HTTP_X_FORWARDED_FOR="198.51.100.20").status_code == 429
    assert _login("alice", PASSWORD, address="10.0.0.6", HTTP_X_FORWARDED_FOR="198.51.100.21").status_code == 302


def test_the_client_is_the_right_most_address_no_trusted_proxy_wrote(settings):
    import ipaddress

    from pmd_site.security import forwarded_client

    settings.PMD_TRUSTED_PROXIES = [ipaddress.ip_network("10.0.0.0/24")]
    settings.PMD_FORWARD_AUTH_PROXIES = [ipaddress.ip_network("127.0.0.1")]
    assert forwarded_client("10.0.0.1", "9.9.9.9, 5.6.7.8, 10.0.0.2") == "5.6.7.8"  # two proxies in a row
    assert forwarded_client("127.0.0.1", "9.9.9.9, 5.6.7.8") == "5.6.7.8"  # the forward-auth proxy is trusted too
    assert forwarded_client("10.0.0.1", "not-an-address, 10.0.0.2") == "10.0.0.2"
    assert forwarded_client("192.0.2.1", "5.6.7.8") == "192.0.2.1"  # not a proxy: the header is ignored


def test_x_forwarded_proto_counts_only_from_a_trusted_proxy(alice, settings):
    """Links pmd writes (here the password-reset mail) say https only when the proxy says so."""
    import ipaddress

    settings.EMAIL_HOST = "smtp.example.org"
    settings.PMD_TRUSTED_PROXIES = [ipaddress.ip_network("10.0.0.6")]
    for address, scheme in (("10.0.0.5", "http"), ("10.0.0.6", "https")):
        mail.outbox.clear()
        client = Client(REMOTE_ADDR=address, HTTP_X_FORWARDED_PROTO="https")
        client.post("/accounts/password_reset/", {"email": "alice@example.org"})
        assert re.search(r"(https?)://[^/\s]+/accounts/reset/", mail.outbox[0].body).group(1) == scheme


def test_user_unlock_and_new_password_lift_the_lockout(alice, low_limits, run_cli, monkeypatch):
    import io

    for _ in range(3):
        _login("alice", "wrong")
    assert _login("alice", PASSWORD, address="203.0.113.1").status_code == 429
    code, out, _ = run_cli("user", "unlock", "alice")
    assert code == 0 and "unlocked" in out
    assert _login("alice", PASSWORD, address="203.0.113.1").status_code == 302

    for _ in range(3):
        _login("alice", "wrong", address="203.0.113.2")
    monkeypatch.setattr("sys.stdin", io.StringIO("a brand new passphrase\n"))
    code, _, _ = run_cli("user", "password", "alice", "--password-stdin")
    assert code == 0
    assert _login("alice", "a brand new passphrase", address="203.0.113.3").status_code == 302


# --- bearer-token throttling ----------------------------------------------------------------


def _api(token: str, address: str):
    return Client(REMOTE_ADDR=address, HTTP_AUTHORIZATION=f"Bearer {token}").get("/api/status")


def test_api_blocks_an_address_after_bad_tokens_even_for_a_valid_one(alice, low_limits):
    good = token_create(user=alice, access=Access.local_user(), can_write=True).raw
    assert _api(good, "198.51.100.9").status_code == 200
    for bad in ("pmd_nope", "not-even-a-pmd-token", "pmd_" + "x" * 40):
        assert _api(bad, "198.51.100.9").status_code == 401
    blocked = _api(good, "198.51.100.9")
    assert blocked.status_code == 429
    assert int(blocked["Retry-After"]) > 0
    assert "too many failed API token attempts" in blocked.json()["message"]
    # Other addresses are unaffected.
    assert _api(good, "198.51.100.10").status_code == 200


def test_token_block_ends_after_the_cooloff(alice, low_limits):
    from indexing.models import TokenFailure

    good = token_create(user=alice, access=Access.local_user(), can_write=True).raw
    for _ in range(3):
        _api("pmd_wrong", "198.51.100.11")
    assert _api(good, "198.51.100.11").status_code == 429
    past = timezone.now() - timedelta(minutes=16)
    TokenFailure.objects.filter(address="198.51.100.11").update(window_start=past, blocked_until=past)
    assert _api(good, "198.51.100.11").status_code == 200
    assert _api("pmd_wrong", "198.51.100.11").status_code == 401
    assert TokenFailure.objects.get(address="198.51.100.11").failures == 1  # a fresh window


def test_unlock_with_address_clears_a_token_block(alice, low_limits, run_cli):
    good = token_create(user=alice, access=Access.local_user(), can_write=True).raw
    for _ in range(3):
        _api("pmd_wrong", "198.51.100.12")
    assert _api(good, "198.51.100.12").status_code == 429
    code, _, _ = run_cli("user", "unlock", "alice", "--address", "198.51.100.12")
    assert code == 0
    assert _api(good, "198.51.100.12").status_code == 200


def test_unlock_names_what_it_unlocked_and_refuses_a_bad_address(alice, run_cli, capsys):
    code, out, _ = run_cli("user", "unlock", "alice", "--address", " 2001:DB8::1 ")
    assert code == 0
    assert "unlocked alice and 2001:db8::1" in out  # as the lockout records it
    with pytest.raises(SystemExit) as exit_:
        run_cli("user", "unlock", "alice", "--address", "[/x]")
    assert exit_.value.code == 2
    assert "not an IP address: '[/x]'" in capsys.readouterr().err


def _asgi_post(path: str, headers: dict[str, str], client: tuple[str, int]):
    """One HTTP request through pmd_site.asgi.application, in-process; returns (status, headers, body)."""
    from pmd_site.asgi import application

    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": client,
        "server": ("127.0.0.1", 8000),
    }
    try:
        asyncio.run(application(scope, receive, send))
    finally:
        close_other_connections()  # the ASGI worker thread's connection would block the teardown
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, body


@pytest.mark.django_db(transaction=True)
def test_mcp_blocks_an_address_after_bad_tokens_with_json_429(alice, low_limits):
    from indexing.models import TokenFailure

    good = token_create(user=alice, access=Access.local_user(), can_write=True).raw
    for _ in range(3):
        status, _, body = _asgi_post(
            "/mcp", {"Authorization": "Bearer pmd_wrong", "Host": "localhost"}, ("198.51.100.30", 5000)
        )
        assert status == 401 and json.loads(body)["code"] == "unauthorized"  # OAuth's challenge
    status, headers, body = _asgi_post(
        "/mcp", {"Authorization": f"Bearer {good}", "Host": "localhost"}, ("198.51.100.30", 5001)
    )
    assert status == 429
    assert int(headers["retry-after"]) > 0
    assert headers["content-type"] == "application/json"
    assert "too many failed API token attempts" in json.loads(body)["message"]
    assert json.loads(body)["code"] == "throttled"  # the API's error shape, from /mcp's router too
    assert TokenFailure.objects.get(address="198.51.100.30").failures == 3


# --- Content-Security-Policy and the API docs -----------------------------------------------


@pytest.fixture
def member_client(alice):
    return web_client(alice)


@pytest.mark.parametrize("url", ["/", "/doc/notes/README.md", "/accounts/login/", "/admin/login/", "/api/docs"])
def test_every_html_page_sends_the_policy(member_client, indexed_collection, url):
    response = (Client() if "login" in url else member_client).get(url)
    assert response.status_code == 200
    policy = response["Content-Security-Policy"]
    for directive in (
        "default-src 'self'",
        "script-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
        "img-src 'self' data:",
        "style-src 'self';",
    ):  # no <style> elements; only style attributes (tables)
        assert directive in policy, directive
    assert "https:" not in policy  # no remote images by default


def test_remote_images_only_with_the_setting(member_client, indexed_collection, settings):
    assert "https:" not in member_client.get("/doc/notes/README.md")["Content-Security-Policy"]
    settings.PMD_ALLOW_REMOTE_IMAGES = True
    policy = member_client.get("/doc/notes/README.md")["Content-Security-Policy"]
    assert "img-src 'self' data: https:" in policy
    # Pages with a policy of their own keep it: raw documents stay sandboxed.
    assert member_client.get("/raw/notes/README.md")["Content-Security-Policy"] == "default-src 'none'; sandbox"


def test_api_docs_load_everything_from_pmd(db):
    response = Client().get("/api/docs")
    html = response.content.decode()
    references = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert references, html
    assert not [r for r in references if "//" in r], references  # no other host
    assert "cdn.jsdelivr.net" not in html
    assert "<script>" not in html  # nothing inline for the policy to block
    for path in references:
        asset = Client().get(path)
        assert asset.status_code == 200, path
    assert any(r.endswith("swagger-ui-bundle.js") for r in references)
    assert any(r.endswith("swagger-ui.css") for r in references)


# --- password reset -------------------------------------------------------------------------


def test_without_email_there_is_no_reset_just_the_admin_command(alice, caplog):
    login = Client().get("/accounts/login/").content.decode()
    assert "/accounts/password_reset/" not in login
    assert "pmd user password NAME" in login
    caplog.set_level(logging.ERROR)
    for method in ("get", "post"):
        response = getattr(Client(), method)("/accounts/password_reset/", {"email": "alice@example.org"})
        assert response.status_code == 404
        assert "pmd user password NAME" in response.content.decode()
    assert Client().get("/accounts/reset/MQ/set-password/").status_code == 404
    assert mail.outbox == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_with_email_reset_sends_one_mail_whose_link_sets_the_password(alice, settings):
    settings.EMAIL_HOST = "smtp.example.org"  # the test backend (locmem) keeps the mail
    client = Client()
    assert "/accounts/password_reset/" in client.get("/accounts/login/").content.decode()
    response = client.post("/accounts/password_reset/", {"email": "alice@example.org"})
    assert response.status_code == 302 and response.url == "/accounts/password_reset/done/"
    assert client.get(response.url).status_code == 200
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["alice@example.org"]
    link = re.search(r"https?://[^/\s]+(/accounts/reset/\S+/)", mail.outbox[0].body).group(1)
    form = client.get(link, follow=True)
    assert form.status_code == 200 and "new_password1" in form.content.decode()
    done = client.post(
        form.redirect_chain[-1][0], {"new_password1": "a fresh passphrase 42", "new_password2": "a fresh passphrase 42"}
    )
    assert done.status_code == 302 and done.url == "/accounts/reset/done/"
    alice.refresh_from_db()
    assert alice.check_password("a fresh passphrase 42")


def test_client_address_parsing_strips_a_port_from_ipv4_and_ipv6(settings):
    from pmd_site.addresses import normalized_ip
    from pmd_site.security import forwarded_client

    assert normalized_ip("1.2.3.4:5678") == "1.2.3.4"
    assert normalized_ip("[::1]:443") == "::1"
    assert normalized_ip("::1") == "::1"
    assert normalized_ip("1.2.3.4") == "1.2.3.4"
    assert normalized_ip("1.2.3.4:port") is None
    assert normalized_ip("evil:80") is None
    settings.PMD_TRUSTED_PROXIES = [__import__("ipaddress").ip_network("127.0.0.1")]
    assert forwarded_client("127.0.0.1", "9.9.9.9, 5.6.7.8:1234") == "5.6.7.8"


@pytest.mark.parametrize("behind_proxy", [False, True])
def test_serve_never_lets_uvicorn_read_forwarded_headers(settings, monkeypatch, behind_proxy):
    import contextlib

    import uvicorn

    from pmd_site.cli import services
    from pmd_site.runtime import process as runtime

    settings.PMD_BEHIND_HTTPS_PROXY = behind_proxy
    seen = {}
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: seen.update(kw))
    monkeypatch.setattr(runtime, "database_lease", contextlib.nullcontext)
    monkeypatch.setattr(services, "die_with_supervisor", lambda: None)
    args = type("Args", (), {"host": "127.0.0.1", "port": 0, "workers": 1})()
    assert services.cmd_serve(args) == 0
    assert seen["proxy_headers"] is False


def test_an_https_proxy_without_its_addresses_is_a_configuration_error():
    """Behind a proxy pmd must know its address, or it could only trust everyone or no one."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "pmd_site.settings",
        "PMD_BEHIND_HTTPS_PROXY": "true",
        "PMD_TRUSTED_PROXIES": "",
        "PMD_FORWARD_AUTH_PROXIES": "",
    }
    probe = [sys.executable, "-c", "import django; django.setup()"]
    root = Path(__file__).resolve().parents[2]
    refused = subprocess.run(probe, capture_output=True, text=True, env=env, cwd=root, timeout=120)
    assert refused.returncode != 0 and "PMD_BEHIND_HTTPS_PROXY=true needs PMD_TRUSTED_PROXIES" in refused.stderr
    env["PMD_TRUSTED_PROXIES"] = "127.0.0.1"
    assert subprocess.run(probe, capture_output=True, text=True, env=env, cwd=root, timeout=120).returncode == 0
