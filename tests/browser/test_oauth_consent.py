"""The OAuth consent page in a real browser: the member allows, and Chromium follows the answer's
redirect to the client on another origin (the page's form-action names that origin)."""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

pytestmark = pytest.mark.browser

CALLBACK = "https://agent.example/oauth/callback"


def _challenge(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")


def test_allowing_a_client_returns_the_browser_to_it_with_a_code(live_server, make_user, login, shot):
    from indexing.models import OAuthGrant

    registered = httpx.post(
        f"{live_server.url}/oauth/register",
        json={"client_name": "Remote agent", "redirect_uris": [CALLBACK], "token_endpoint_auth_method": "none"},
    )
    assert registered.status_code == 201, registered.text
    client_id = registered.json()["client_id"]
    make_user("rhea")
    page = login("rhea")
    violations: list[str] = []
    page.on("console", lambda msg: violations.append(msg.text) if "Content Security Policy" in msg.text else None)
    arrived: list[str] = []

    def client_callback(route):
        arrived.append(route.request.url)
        route.fulfill(status=200, content_type="text/plain", body="signed in")

    page.route("https://agent.example/**", client_callback)
    verifier = "v" * 60
    query = urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": CALLBACK,
            "state": "xyz",
            "scope": "read write",
            "code_challenge": _challenge(verifier),
            "code_challenge_method": "S256",
        }
    )
    page.goto(f"{live_server.url}/oauth/authorize?{query}")
    page.locator("h1", has_text="Remote agent").wait_for()
    assert page.locator("input[name=allow_write]").is_checked()  # asked for, shown, and can be unticked
    page.locator("input[name=allow_write]").uncheck()
    shot(page, "oauth-consent")
    page.click("button[value=allow]")
    page.wait_for_url(f"{CALLBACK}?**")
    assert arrived and parse_qs(urlsplit(arrived[0]).query)["state"] == ["xyz"]
    code = parse_qs(urlsplit(arrived[0]).query)["code"][0]
    tokens = httpx.post(
        f"{live_server.url}/oauth/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": CALLBACK,
            "client_id": client_id,
            "code_verifier": verifier,
        },
    )
    assert tokens.status_code == 200 and tokens.json()["scope"] == "read"
    assert OAuthGrant.objects.get().token.can_write is False
    assert not violations, violations
