"""OAuth 2.1 for remote agents, end to end: the MCP Python SDK's own OAuth client against pmd's
real endpoints served by uvicorn on loopback, a member's browser simulated with httpx (sign in,
consent form, redirect to the client's callback); then the protocol's refusals one by one."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import pytest

from indexing.access import Access
from indexing.models import ApiToken, AuditEvent, OAuthClient, OAuthCode, OAuthGrant
from tests.support.factories import make_token, make_user
from tests.support.mcp_client import SERVED_DB, serve_asgi

pytestmark = SERVED_DB

CALLBACK = "http://127.0.0.1:1/callback"  # never reached: the simulated browser stops at the redirect
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
}


@pytest.fixture
def served(indexed_collection):
    with serve_asgi() as url:
        yield url


@pytest.fixture
def ann(db):
    return make_user("ann")


class Browser:
    """A member's browser: signs in with a password and answers the consent page."""

    def __init__(self, base: str, *, user: str = "ann", allow: bool = True, write: bool = False, collections=()):
        self.http = httpx.Client(base_url=base, timeout=30)
        self.user, self.allow, self.write, self.collections = user, allow, write, list(collections)
        self.consent_page = ""
        self.consent_policy = ""

    def _csrf(self, html: str) -> str:
        return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)

    def sign_in(self, next_url: str = "/") -> httpx.Response:
        login = self.http.get("/accounts/login/")
        signed_in = self.http.post(
            "/accounts/login/",
            data={
                "username": self.user,
                "password": f"pw-{self.user}-123",
                "next": next_url,
                "csrfmiddlewaretoken": self._csrf(login.text),
            },
        )
        assert signed_in.status_code == 302, signed_in.text
        return signed_in

    def authorize(self, url: str) -> str:
        """Open the authorization URL, sign in when asked, answer; the client's callback URL."""
        answered = self.answer(url)
        assert answered.status_code == 302, answered.text
        return answered.headers["location"]

    def answer(self, url: str) -> httpx.Response:
        """Open the authorization URL, sign in when asked, answer the consent page: the answer."""
        response = self.http.get(url)
        if response.status_code == 302 and "/accounts/login/" in response.headers["location"]:
            next_url = parse_qs(urlsplit(response.headers["location"]).query)["next"][0]
            signed_in = self.sign_in(next_url)
            response = self.http.get(signed_in.headers["location"])
        assert response.status_code == 200, response.text
        self.consent_page = response.text
        self.consent_policy = response.headers["content-security-policy"]
        form = {"csrfmiddlewaretoken": self._csrf(response.text), "decision": "allow" if self.allow else "deny"}
        if self.write:
            form["allow_write"] = "1"
        return self.http.post(url, data={**form, "collections": self.collections})


class Memory:
    """The SDK's TokenStorage, in memory."""

    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


def sdk_provider(base: str, browser: Browser, storage: Memory):
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

    callbacks = []

    async def redirect_handler(url: str) -> None:
        callbacks.append(await anyio.to_thread.run_sync(browser.authorize, url))

    async def callback_handler() -> AuthorizationCodeResult:
        query = parse_qs(urlsplit(callbacks[-1]).query)
        return AuthorizationCodeResult(code=query["code"][0], state=query["state"][0])

    return OAuthClientProvider(
        server_url=f"{base}/mcp",
        client_metadata=OAuthClientMetadata(
            client_name="Test agent",
            redirect_uris=[CALLBACK],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )


def mcp_status(base: str, access_token: str | None) -> httpx.Response:
    headers = dict(MCP_HEADERS)
    if access_token:
        headers["Authorization"] = f"Bearer {access_token}"
    return httpx.post(f"{base}/mcp", json=INITIALIZE, headers=headers, timeout=10)


def test_sdk_client_signs_in_with_oauth_searches_refreshes_and_is_revoked(served, ann, indexed_collection):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    browser = Browser(served, collections=["notes"])
    storage = Memory()
    provider = sdk_provider(served, browser, storage)
    doc = indexed_collection.documents.filter(active=True).order_by("path").first()

    async def session(work):
        async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
            async with Client(streamable_http_client(f"{served}/mcp", http_client=http)) as client:
                return await work(client)

    async def first(client):
        tools = await client.list_tools()
        found = await client.call_tool("search", {"query": "postgres tuning"})
        fetched = await client.call_tool("fetch", {"id": doc.docid})
        return tools, found, fetched

    tools, found, fetched = anyio.run(session, first)
    # discovery → registration → consent → token: the SDK did it all from the 401's challenge.
    assert {"search", "fetch"} <= {t.name for t in tools.tools}
    assert "Test agent" in browser.consent_page and "write" in browser.consent_page
    assert browser.consent_policy.endswith("http://127.0.0.1:1")  # the consent form may redirect there
    assert not found.is_error and found.structured_content["results"], found.content
    # ChatGPT reads the one text item as JSON: the same object as the structured content.
    assert json.loads(found.content[0].text) == found.structured_content
    assert json.loads(fetched.content[0].text) == fetched.structured_content
    assert set(fetched.structured_content) == {"id", "title", "text", "url", "metadata"}
    first_result = found.structured_content["results"][0]
    assert set(first_result) == {"id", "title", "url", "text"}
    assert first_result["url"].startswith(f"{served}/doc/notes/")
    assert fetched.structured_content["text"] == doc.content.body
    assert fetched.structured_content["url"] == f"{served}/doc/notes/{doc.path}"

    # The access token is an ordinary read-only API token of ann's, limited to what she ticked.
    grant = OAuthGrant.objects.select_related("token", "client").get()
    assert grant.user == ann and grant.client.name == "Test agent"
    assert grant.token.can_write is False
    assert [c.name for c in grant.token.collections.all()] == ["notes"]
    first_tokens = storage.tokens
    assert first_tokens.scope == "read" and first_tokens.refresh_token.startswith("pmdr_")
    api = httpx.get(f"{served}/api/status", headers={"Authorization": f"Bearer {first_tokens.access_token}"})
    assert api.status_code == 200

    # Refresh: the SDK sees its token expired and refreshes it; the old values stop working.
    provider.context.token_expiry_time = time.time() - 1

    async def again(client):
        return await client.call_tool("search", {"query": "postgres tuning"})

    assert not anyio.run(session, again).is_error
    refreshed = storage.tokens
    assert refreshed.access_token != first_tokens.access_token
    assert refreshed.refresh_token != first_tokens.refresh_token
    assert mcp_status(served, first_tokens.access_token).status_code == 401
    assert mcp_status(served, refreshed.access_token).status_code == 200
    with httpx.Client(base_url=served, timeout=10) as http:
        stranger = _register(http)
    stolen = httpx.post(
        f"{served}/oauth/token",
        data={"grant_type": "refresh_token", "refresh_token": refreshed.refresh_token, "client_id": stranger},
    )
    assert stolen.status_code == 400 and stolen.json()["error"] == "invalid_grant"  # another client's token
    assert mcp_status(served, refreshed.access_token).status_code == 200

    # Revocation (RFC 7009) by the refresh token ends the whole grant: then a 401 with the challenge.
    revoked = httpx.post(
        f"{served}/oauth/revoke",
        data={"token": refreshed.refresh_token, "client_id": storage.client_info.client_id},
    )
    assert revoked.status_code == 200
    refused = mcp_status(served, refreshed.access_token)
    assert refused.status_code == 401
    assert 'resource_metadata="' in refused.headers["www-authenticate"]
    assert AuditEvent.objects.filter(action="oauth.grant").exists()
    assert AuditEvent.objects.filter(action="oauth.revoke").exists()


def test_discovery_documents_name_pmd_as_its_own_authorization_server(served):
    with httpx.Client(base_url=served, timeout=10) as http:
        challenge = mcp_status(served, None)
        assert challenge.status_code == 401
        metadata_url = re.search(r'resource_metadata="([^"]+)"', challenge.headers["www-authenticate"]).group(1)
        assert metadata_url == f"{served}/.well-known/oauth-protected-resource/mcp"
        assert challenge.json()["id"] == 1 and "pmd token create" in challenge.json()["error"]["message"]
        resource = http.get(metadata_url).json()
        assert resource["resource"] == f"{served}/mcp" and resource["authorization_servers"] == [served]
        assert http.get("/.well-known/oauth-protected-resource").json()["resource"] == served
        assert http.get("/.well-known/oauth-protected-resource/api").json()["resource"] == f"{served}/api"
        server = http.get("/.well-known/oauth-authorization-server").json()
        assert server["issuer"] == served
        assert server["code_challenge_methods_supported"] == ["S256"]
        assert server["registration_endpoint"] == f"{served}/oauth/register"
        assert server["revocation_endpoint"] == f"{served}/oauth/revoke"
        api = http.get("/api/status")
        assert api.status_code == 401
        assert (
            f'resource_metadata="{served}/.well-known/oauth-protected-resource/api"' in api.headers["www-authenticate"]
        )


def _register(http) -> str:
    registered = http.post(
        "/oauth/register",
        json={"client_name": "Probe", "redirect_uris": [CALLBACK], "token_endpoint_auth_method": "none"},
    )
    assert registered.status_code == 201, registered.text
    assert "client_secret" not in registered.json() or not registered.json()["client_secret"]
    return registered.json()["client_id"]


def _challenge(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")


def _authorize_url(client_id: str, **extra) -> str:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": CALLBACK,
        "state": "s1",
        "scope": "read write",
        **extra,
    }
    return "/oauth/authorize?" + httpx.QueryParams(params).__str__()


def test_pkce_s256_is_required_and_a_code_is_good_once_for_its_verifier(served, ann):
    verifier = "v" * 50
    with httpx.Client(base_url=served, timeout=10) as http:
        client_id = _register(http)
        browser = Browser(served, write=True)
        browser.sign_in()
        # No challenge, or a plain one: refused back to the client, before anything is granted.
        for extra in ({}, {"code_challenge": verifier, "code_challenge_method": "plain"}):
            refused = browser.http.get(_authorize_url(client_id, **extra))
            assert refused.status_code == 302 and "error=invalid_request" in refused.headers["location"], extra
        callback = browser.authorize(
            _authorize_url(client_id, code_challenge=_challenge(verifier), code_challenge_method="S256")
        )
        code = parse_qs(urlsplit(callback).query)["code"][0]
        exchange = {"grant_type": "authorization_code", "code": code, "redirect_uri": CALLBACK, "client_id": client_id}
        wrong = http.post("/oauth/token", data={**exchange, "code_verifier": "x" * 50})
        assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
        good = http.post("/oauth/token", data={**exchange, "code_verifier": verifier})
        assert good.status_code == 200, good.text
        assert good.json()["scope"] == "read write"
        again = http.post("/oauth/token", data={**exchange, "code_verifier": verifier})
        assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    token = ApiToken.objects.get(oauth_grant__isnull=False, revoked__isnull=True, digest__isnull=False)
    assert token.can_write is True and token.user == ann


def test_a_denied_consent_redirects_with_access_denied_and_grants_nothing(served, ann):
    with httpx.Client(base_url=served, timeout=10) as http:
        client_id = _register(http)
    callback = Browser(served, allow=False).authorize(
        _authorize_url(client_id, code_challenge=_challenge("v" * 50), code_challenge_method="S256")
    )
    assert callback.startswith(CALLBACK) and "error=access_denied" in callback and "state=s1" in callback
    assert not OAuthGrant.objects.exists()


def test_an_unregistered_redirect_uri_is_refused_on_pmds_page_not_redirected(served, ann):
    with httpx.Client(base_url=served, timeout=10) as http:
        client_id = _register(http)
    browser = Browser(served)
    url = _authorize_url(client_id, code_challenge=_challenge("v" * 50), code_challenge_method="S256")
    browser.sign_in()
    evil = url.replace("127.0.0.1%3A1", "evil.example")
    response = browser.http.get(evil)
    assert response.status_code == 400 and "cannot be used" in response.text


def test_consent_cannot_grant_a_collection_the_member_does_not_see(served, ann, indexed_collection):
    from indexing.models import Collection

    Collection.objects.filter(pk=indexed_collection.pk).update(visibility=Collection.Visibility.PRIVATE)
    with httpx.Client(base_url=served, timeout=10) as http:
        client_id = _register(http)
    browser = Browser(served, collections=["notes"])
    url = _authorize_url(client_id, code_challenge=_challenge("v" * 50), code_challenge_method="S256")
    answered = browser.answer(url)  # a hand-made form naming the collection she does not see
    assert answered.status_code == 400 and "ann sees no collection named" in answered.text
    assert "notes" not in browser.consent_page.split("Which collections")[1]
    assert not OAuthGrant.objects.exists()


def test_oauth_clients_are_listed_on_the_tokens_page_and_revoked_there(served, ann):
    from django.test import Client

    with httpx.Client(base_url=served, timeout=10) as http:
        client_id = _register(http)
        verifier = "v" * 50
        callback = Browser(served).authorize(
            _authorize_url(client_id, code_challenge=_challenge(verifier), code_challenge_method="S256")
        )
        code = parse_qs(urlsplit(callback).query)["code"][0]
        tokens = http.post(
            "/oauth/token",
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": CALLBACK,
                "client_id": client_id,
                "code_verifier": verifier,
            },
        ).json()
    pasted = make_token(ann)
    web = Client()
    web.force_login(ann)
    page = web.get("/tokens/").content.decode()
    grant = OAuthGrant.objects.get()
    assert "Probe" in page and f"/tokens/oauth/{grant.pk}/revoke/" in page
    assert f"{grant.token.prefix}…" not in page  # not among the pasted tokens
    other = Client()
    other.force_login(make_user("bob"))
    assert other.post(f"/tokens/oauth/{grant.pk}/revoke/").status_code == 404
    assert web.post(f"/tokens/oauth/{grant.pk}/revoke/").status_code == 302
    assert mcp_status(served, tokens["access_token"]).status_code == 401
    assert mcp_status(served, pasted).status_code == 200  # pasted tokens keep working


def test_with_oauth_off_there_is_no_discovery_and_mcp_answers_403(served, settings):
    settings.PMD_OAUTH = False
    with httpx.Client(base_url=served, timeout=10) as http:
        assert http.get("/.well-known/oauth-authorization-server").status_code == 404
        assert http.get("/.well-known/oauth-protected-resource/mcp").status_code == 404
        assert http.post("/oauth/register", json={"redirect_uris": [CALLBACK]}).status_code == 404
        missing = mcp_status(served, None)
        assert missing.status_code == 403 and "www-authenticate" not in missing.headers
        assert http.get("/api/status").headers["www-authenticate"] == 'Bearer realm="pmd"'


def test_a_client_with_a_secret_must_send_it_to_exchange_its_code(served, ann):
    verifier = "v" * 50
    with httpx.Client(base_url=served, timeout=10) as http:
        registered = http.post(
            "/oauth/register",
            json={
                "client_name": "Server app",
                "redirect_uris": [CALLBACK],
                "token_endpoint_auth_method": "client_secret_basic",
            },
        ).json()
        assert registered["client_secret"]
        callback = Browser(served).authorize(
            _authorize_url(registered["client_id"], code_challenge=_challenge(verifier), code_challenge_method="S256")
        )
        exchange = {
            "grant_type": "authorization_code",
            "code": parse_qs(urlsplit(callback).query)["code"][0],
            "redirect_uri": CALLBACK,
            "client_id": registered["client_id"],
            "code_verifier": verifier,
        }
        anonymous = http.post("/oauth/token", data=exchange)
        assert anonymous.status_code == 401 and anonymous.json()["error"] == "invalid_client"
        wrong = http.post("/oauth/token", data=exchange, auth=(registered["client_id"], "not-the-secret"))
        assert wrong.status_code == 401
        good = http.post("/oauth/token", data=exchange, auth=(registered["client_id"], registered["client_secret"]))
        assert good.status_code == 200, good.text
        assert good.json()["scope"] == "read"


def _exchange(http, client_id: str, verifier: str, callback: str) -> dict:
    tokens = http.post(
        "/oauth/token",
        data={
            "grant_type": "authorization_code",
            "code": parse_qs(urlsplit(callback).query)["code"][0],
            "redirect_uri": CALLBACK,
            "client_id": client_id,
            "code_verifier": verifier,
        },
    )
    assert tokens.status_code == 200, tokens.text
    return tokens.json()


def test_a_replaced_refresh_token_used_again_ends_the_grant(served, ann):
    verifier = "v" * 50
    with httpx.Client(base_url=served, timeout=10) as http:
        client_id = _register(http)
        callback = Browser(served).authorize(
            _authorize_url(client_id, code_challenge=_challenge(verifier), code_challenge_method="S256")
        )
        first = _exchange(http, client_id, verifier, callback)

        def refresh(token: str) -> httpx.Response:
            return http.post(
                "/oauth/token", data={"grant_type": "refresh_token", "refresh_token": token, "client_id": client_id}
            )

        second = refresh(first["refresh_token"])
        assert second.status_code == 200 and second.json()["scope"] == "read"
        replayed = refresh(first["refresh_token"])
        assert replayed.status_code == 400 and replayed.json()["error"] == "invalid_grant"
        # Whoever replayed it, the grant is over: the newest tokens stop working too.
        assert refresh(second.json()["refresh_token"]).json()["error"] == "invalid_grant"
    assert mcp_status(served, second.json()["access_token"]).status_code == 401
    revoked = AuditEvent.objects.get(action="oauth.revoke")
    assert revoked.detail["reason"] == "a replaced refresh token was used again" and revoked.actor_label == "pmd"


def test_scopes_pmd_does_not_know_are_dropped_not_refused(served, ann):
    verifier = "v" * 50
    with httpx.Client(base_url=served, timeout=10) as http:
        client_id = _register(http)
        url = _authorize_url(
            client_id,
            scope="openid offline_access read",
            code_challenge=_challenge(verifier),
            code_challenge_method="S256",
        )
        tokens = _exchange(http, client_id, verifier, Browser(served).authorize(url))
    assert tokens["scope"] == "read" and tokens["refresh_token"]


@pytest.mark.parametrize(
    "body",
    [
        "",
        "not json",
        "[]",
        "{}",
        '{"redirect_uris": "https://agent.example/cb"}',
        '{"redirect_uris": []}',
        '{"redirect_uris": ["javascript:alert(1)"]}',
        '{"redirect_uris": ["https://agent.example/cb#frag"]}',
        '{"redirect_uris": ["https://agent.example/cb\\u0000"]}',
        '{"redirect_uris": ["https://agent.example/cb"], "client_name": 5}',
        '{"redirect_uris": ["https://agent.example/cb"], "client_name": "' + "n" * 201 + '"}',
        '{"redirect_uris": ["https://agent.example/cb"], "token_endpoint_auth_method": "private_key_jwt"}',
        '{"redirect_uris": ["https://agent.example/cb"], "grant_types": ["client_credentials"]}',
    ],
)
def test_bad_client_metadata_is_refused_with_oauths_error_and_nothing_is_kept(db, body, settings):
    from django.test import Client

    settings.ALLOWED_HOSTS = ["localhost"]
    response = Client().post("/oauth/register", data=body, content_type="application/json", HTTP_HOST="localhost")
    assert response.status_code == 400 and response.json()["error"] == "invalid_client_metadata", response.content
    assert not OAuthClient.objects.exists()


def test_oauth_over_plain_http_is_refused_except_on_loopback(db, settings):
    from django.test import Client

    settings.ALLOWED_HOSTS = ["pmd.lan"]
    response = Client().post("/oauth/token", {"grant_type": "authorization_code"}, HTTP_HOST="pmd.lan")
    assert response.status_code == 400 and "PMD_BEHIND_HTTPS_PROXY" in response.json()["error_description"]


def _grant(served: str, *, write: bool = False, collections=()) -> dict:
    """A member's consent through the simulated browser, exchanged for tokens: the token response."""
    verifier = "v" * 50
    with httpx.Client(base_url=served, timeout=10) as http:
        client_id = _register(http)
        callback = Browser(served, write=write, collections=collections).authorize(
            _authorize_url(client_id, code_challenge=_challenge(verifier), code_challenge_method="S256")
        )
        return _exchange(http, client_id, verifier, callback)


def test_an_oauth_token_sees_what_a_pasted_token_with_the_same_scope_sees(served, ann, indexed_collection, tmp_path):
    from tests.support.factories import make_vault

    make_vault(tmp_path / "other", {"zebra.md": "# Zebra\n\nquagga stripes\n"}, name="other")
    limited = _grant(served, collections=["notes"])["access_token"]
    whole = _grant(served)["access_token"]
    pasted = make_token(ann, collections=["notes"])

    def found(token: str) -> list[str]:
        response = httpx.get(
            f"{served}/api/search", params={"q": "quagga", "json": "1"}, headers={"Authorization": f"Bearer {token}"}
        )
        assert response.status_code == 200, response.text
        return [r["uri"] for r in response.json()["results"]]

    assert found(limited) == found(pasted) == []
    assert found(whole) == ["pmd://other/zebra.md"]
    save = {"name": "zebras", "query": "quagga"}
    refused = httpx.post(f"{served}/api/saved", json=save, headers={"Authorization": f"Bearer {whole}"})
    assert refused.status_code == 403 and "read-only" in refused.json()["message"]  # no write scope granted
    writer = _grant(served, write=True)["access_token"]
    saved = httpx.post(f"{served}/api/saved", json=save, headers={"Authorization": f"Bearer {writer}"})
    assert saved.status_code in (200, 201), saved.text


def test_a_member_signed_in_by_the_forward_auth_proxy_consents_as_themselves(db, settings):
    """Any sign-in works: the consent page is an ordinary page of the member's web session."""
    import ipaddress

    from django.test import Client

    settings.ALLOWED_HOSTS = ["localhost"]
    settings.PMD_FORWARD_AUTH = True
    settings.PMD_FORWARD_AUTH_PROXIES = [ipaddress.ip_network("10.9.0.0/24")]
    browser = Client(REMOTE_ADDR="10.9.0.3", HTTP_REMOTE_USER="carol", HTTP_HOST="localhost")
    registered = Client(HTTP_HOST="localhost").post(
        "/oauth/register",
        data={"client_name": "Proxy agent", "redirect_uris": [CALLBACK], "token_endpoint_auth_method": "none"},
        content_type="application/json",
    )
    client_id = registered.json()["client_id"]
    url = _authorize_url(client_id, code_challenge=_challenge("v" * 50), code_challenge_method="S256")
    consent = browser.get(url)
    assert consent.status_code == 200 and "Proxy agent" in consent.content.decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', consent.content.decode()).group(1)
    answered = browser.post(url, {"csrfmiddlewaretoken": csrf, "decision": "allow"})
    assert answered.status_code == 302 and answered["Location"].startswith(f"{CALLBACK}?code=")
    assert OAuthCode.objects.get().user.get_username() == "carol"


def test_the_consent_form_needs_the_pages_csrf_token(served, ann):
    with httpx.Client(base_url=served, timeout=10) as http:
        client_id = _register(http)
    browser = Browser(served)
    browser.sign_in()
    url = _authorize_url(client_id, code_challenge=_challenge("v" * 50), code_challenge_method="S256")
    forged = browser.http.post(url, data={"decision": "allow"})  # another site's form, without the token
    assert forged.status_code == 403
    assert not OAuthGrant.objects.exists()
    assert not OAuthCode.objects.exists()


def test_browser_based_clients_may_call_the_protocol_endpoints_from_any_origin(served):
    preflight = httpx.options(
        f"{served}/oauth/register",
        headers={"Origin": "https://inspector.example", "Access-Control-Request-Method": "POST"},
    )
    assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"] == "*"
    assert "Content-Type" in preflight.headers["access-control-allow-headers"]
    registered = httpx.post(
        f"{served}/oauth/register",
        json={"redirect_uris": [CALLBACK], "token_endpoint_auth_method": "none"},
        headers={"Origin": "https://inspector.example"},
    )
    assert registered.status_code == 201 and registered.headers["access-control-allow-origin"] == "*"
    metadata = httpx.get(f"{served}/.well-known/oauth-authorization-server")
    assert metadata.headers["access-control-allow-origin"] == "*"


def test_allowing_a_client_again_ends_its_earlier_grant(served, ann):
    verifier = "v" * 50
    with httpx.Client(base_url=served, timeout=10) as http:
        client_id = _register(http)
        url = _authorize_url(client_id, code_challenge=_challenge(verifier), code_challenge_method="S256")
        first = _exchange(http, client_id, verifier, Browser(served).authorize(url))
        second = _exchange(http, client_id, verifier, Browser(served, write=True).authorize(url))
    assert mcp_status(served, first["access_token"]).status_code == 401
    assert mcp_status(served, second["access_token"]).status_code == 200
    live = OAuthGrant.objects.get(revoked__isnull=True)
    assert live.token.can_write is True and OAuthGrant.objects.count() == 2


def _consented(user, name: str = "Probe"):
    """A code as the consent page leaves it, made through the service (no server needed)."""
    from indexing.services import oauth

    client = oauth.oauth_client_register(
        client_id=f"c-{name}", secret=None, name=name, redirect_uris=[CALLBACK], auth_method="none", metadata={}
    )
    return oauth.oauth_code_save(
        raw=f"code-{name}",
        client=client,
        user=user,
        redirect_uri=CALLBACK,
        scope="read",
        collections=[],
        code_challenge=_challenge("v" * 50),
        code_challenge_method="S256",
    )


@pytest.mark.django_db
def test_a_code_exchanged_twice_at_once_grants_once_and_a_refresh_token_refreshes_once(ann):
    """Two token requests racing with one code (or one refresh token): both passed Authlib's checks,
    the second to store its tokens loses."""
    from indexing.errors import TokenNotFound
    from indexing.services import oauth

    code = _consented(ann)
    grant = oauth.oauth_grant_create(code=code, access_raw=oauth.new_access_value(), refresh_raw="pmdr_first")
    with pytest.raises(TokenNotFound):
        oauth.oauth_grant_create(code=code, access_raw=oauth.new_access_value(), refresh_raw="pmdr_second")
    assert OAuthGrant.objects.count() == 1
    oauth.oauth_grant_refresh(grant, presented="pmdr_first", access_raw=oauth.new_access_value(), refresh_raw="pmdr_a")
    with pytest.raises(TokenNotFound):
        oauth.oauth_grant_refresh(
            grant, presented="pmdr_first", access_raw=oauth.new_access_value(), refresh_raw="pmdr_b"
        )
    assert oauth.oauth_grant_find("pmdr_a") is not None


@pytest.mark.django_db  # the admin needs every app, not only those the served tests keep
def test_the_admin_lists_clients_and_grants_and_revokes_grants(ann):
    from django.test import Client

    from indexing.services import oauth

    grant = oauth.oauth_grant_create(
        code=_consented(ann), access_raw=oauth.new_access_value(), refresh_raw=oauth.new_refresh_value()
    )
    root = Client()
    root.force_login(make_user("root", superuser=True))
    assert "Probe" in root.get("/admin/indexing/oauthclient/").content.decode()
    assert "ann" in root.get("/admin/indexing/oauthgrant/").content.decode()
    staff = Client()
    staff.force_login(make_user("stan", staff=True))
    assert staff.get("/admin/indexing/oauthclient/").status_code == 403  # clients: superusers only
    assert "ann" not in staff.get("/admin/indexing/oauthgrant/").content.decode()  # only their own grants
    done = root.post(
        "/admin/indexing/oauthgrant/",
        {"action": "revoke_selected", "_selected_action": [grant.pk], "index": 0},
        follow=True,
    )
    assert "Revoked 1 grant(s)" in done.content.decode()
    assert ApiToken.objects.get(pk=grant.token_id).revoked is not None


def test_a_native_clients_own_scheme_is_where_the_consent_form_may_send_the_browser(served, ann):
    native = "cursor://anysphere.cursor-retrieval/oauth/callback"
    with httpx.Client(base_url=served, timeout=10) as http:
        registered = http.post(
            "/oauth/register",
            json={"client_name": "Editor", "redirect_uris": [native], "token_endpoint_auth_method": "none"},
        )
    assert registered.status_code == 201, registered.text
    browser = Browser(served)
    url = _authorize_url(
        registered.json()["client_id"],
        redirect_uri=native,
        code_challenge=_challenge("v" * 50),
        code_challenge_method="S256",
    )
    assert browser.authorize(url).startswith(f"{native}?code=")
    assert browser.consent_policy.endswith(" cursor:") and "<code>cursor:</code>" in browser.consent_page


def test_a_grant_whose_token_was_revoked_elsewhere_cannot_be_refreshed(served, ann, indexed_collection):
    """Removing the one collection a grant was limited to revokes its token (as for a pasted one):
    the grant neither refreshes into a token that sees more, nor stays listed."""
    from indexing.services.collections import collection_remove
    from indexing.services.oauth import oauth_grants

    tokens = _grant(served, collections=["notes"])
    client_id = OAuthGrant.objects.get().client.client_id
    collection_remove(name="notes", access=Access.local_user())
    refreshed = httpx.post(
        f"{served}/oauth/token",
        data={"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": client_id},
    )
    assert refreshed.status_code == 400 and refreshed.json()["error"] == "invalid_grant"
    assert mcp_status(served, tokens["access_token"]).status_code == 401
    assert oauth_grants(user=ann) == []
