"""OpenID Connect sign-in against a real provider (oidc-provider on loopback, started once for
the module): the whole redirect flow, the provider's groups deciding which collections a member
sees, and every way an answer can be wrong (state replayed, issuer, audience, expiry, signature).
"""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from joserfc import jwt
from joserfc.jwk import RSAKey

from indexing import errors
from indexing.access import Access, visible_collection_names
from indexing.models import AuditEvent, ExternalIdentity
from indexing.services.accounts import identity_link
from indexing.services.sharing import collection_share
from pmd_site.signin import oidc
from tests.support.factories import make_group, make_token, make_user, make_vault
from tests.support.openid import CLIENT_ID, start_provider, stop_provider

pytestmark = pytest.mark.django_db
CALLBACK = "http://testserver/accounts/oidc/test/callback/"


@pytest.fixture(scope="module")
def provider(tmp_path_factory):
    started = start_provider(
        tmp_path_factory.mktemp("openid"),
        redirect_uris=[CALLBACK],
        post_logout_redirect_uris=["http://testserver/accounts/login/"],
    )
    yield started
    stop_provider(started)


@pytest.fixture(autouse=True)
def configured(provider, settings):
    settings.PMD_OIDC_PROVIDERS = [provider.settings()]
    oidc._cache.clear()
    yield
    oidc._cache.clear()


def sign_in(provider, name: str, client: Client | None = None, *, next_url: str = ""):
    """The whole flow: pmd's button, the provider's pages, pmd's callback. (client, callback answer, callback URL)."""
    client = client or Client()
    start = client.get("/accounts/oidc/test/login/" + (f"?next={next_url}" if next_url else ""))
    assert start.status_code == 302, start.content[:500]
    back = provider.sign_in(start["Location"], name)
    split = urlsplit(back)
    answer = client.get(split.path + "?" + split.query)
    return client, answer, split.path + "?" + split.query


def signed_in_as(client) -> str | None:
    response = client.get("/")
    return response.context["user"].get_username() if response.status_code == 200 and response.context else None


@pytest.fixture
def lab_and_hr(tmp_path, settings):
    """`lab` shared with group research, `hr` with group people-ops, `wiki` for everyone."""
    settings.PMD_COLLECTION_ROOTS = [tmp_path]
    local = Access.local_user()
    for name, notes in {
        "lab": {"a.md": "# Lab\n\nassay\n"},
        "hr": {"b.md": "# HR\n\npayroll\n"},
        "wiki": {"c.md": "# Wiki\n\nhello\n"},
    }.items():
        make_vault(tmp_path / name, notes, name=name)
    make_group("research")
    make_group("people-ops")
    collection_share(name="lab", access=local, visibility="shared", groups=["research"])
    collection_share(name="hr", access=local, visibility="shared", groups=["people-ops"])
    collection_share(name="wiki", access=local, visibility="everyone")


def test_login_page_offers_the_provider(client):
    body = client.get("/accounts/login/").content.decode()
    assert "Sign in with Test IdP" in body and 'name="password"' in body


def test_first_sign_in_creates_the_account_and_groups_decide_what_it_sees(provider, lab_and_hr):
    provider.person("alice", groups=["research", "choir"])
    client, answer, _ = sign_in(provider, "alice", next_url="/collections/")
    assert answer.status_code == 302 and answer["Location"] == "/collections/"
    assert signed_in_as(client) == "alice"
    alice = get_user_model().objects.get(username="alice")
    assert not alice.has_usable_password() and alice.email == "alice@example.org"
    assert set(alice.groups.values_list("name", flat=True)) == {"research", "choir"}
    assert ExternalIdentity.objects.get(user=alice).provider == "openid:test"
    assert visible_collection_names(Access.for_user(alice)) == ["lab", "wiki"]
    assert AuditEvent.objects.filter(action="user.create", target="alice").exists()

    # Moved at the provider: the next sign-in takes lab away and gives hr.
    provider.person("alice", groups=["people-ops"])
    sign_in(provider, "alice")
    alice.refresh_from_db()
    assert visible_collection_names(Access.for_user(alice)) == ["hr", "wiki"]
    change = AuditEvent.objects.filter(action="user.groups", target="alice").first()
    assert change.detail["added"] == ["people-ops"] and change.detail["removed"] == ["choir", "research"]
    assert change.detail["via"] == "openid:test"


def test_a_replayed_state_is_refused(provider):
    provider.person("bruno", groups=[])
    client, answer, callback = sign_in(provider, "bruno")
    assert answer.status_code == 302
    replay = Client().get(callback)  # another browser presenting the same answer
    assert replay.status_code == 400 and b"already used" in replay.content
    again = client.get(callback)  # the same browser, twice
    assert again.status_code == 400


def test_a_wrong_issuer_in_discovery_is_refused(provider, settings, client):
    # The same server reached under another name announces its own issuer, not the configured one.
    settings.PMD_OIDC_PROVIDERS = [provider.settings(issuer=provider.issuer.replace("127.0.0.1", "localhost"))]
    response = client.get("/accounts/oidc/test/login/")
    assert response.status_code == 400 and b"names another issuer" in response.content


def _token(provider, key=None, alg="RS256", **claims) -> str:
    now = int(time.time())
    body = {
        "iss": provider.issuer,
        "aud": CLIENT_ID,
        "sub": "someone",
        "iat": now,
        "exp": now + 300,
        "nonce": "n-123",
        **claims,
    }
    body = {k: v for k, v in body.items() if v is not None}
    return jwt.encode({"alg": alg, "kid": "test-signing-key"}, body, key or provider.key)


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"iss": "http://127.0.0.1:1/evil"}, "iss"),
        ({"aud": "another-client"}, "aud"),
        ({"aud": [CLIENT_ID, "another-client"]}, "azp"),
        ({"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}, "exp"),
        ({"nonce": "n-other"}, "nonce"),
        ({"nonce": None}, "nonce"),
    ],
)
def test_id_token_claims_are_checked(provider, change, reason):
    metadata = oidc.discovery(oidc.provider_named("test"))
    good = _token(provider)
    assert oidc.id_token_claims(oidc.provider_named("test"), metadata, good, nonce="n-123")["sub"] == "someone"
    with pytest.raises(errors.SignInFailed) as caught:
        oidc.id_token_claims(oidc.provider_named("test"), metadata, _token(provider, **change), nonce="n-123")
    assert reason in str(caught.value)


def test_unsigned_and_foreign_signed_tokens_are_refused(provider):
    metadata = oidc.discovery(oidc.provider_named("test"))
    import base64
    import json

    def b64(data):
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    now = int(time.time())
    claims = {"iss": provider.issuer, "aud": CLIENT_ID, "sub": "x", "iat": now, "exp": now + 60, "nonce": "n-123"}
    unsigned = f"{b64({'alg': 'none'})}.{b64(claims)}."
    stranger = RSAKey.generate_key(2048, parameters={"kid": "test-signing-key"})
    for token in (unsigned, _token(provider, key=stranger)):
        with pytest.raises(errors.SignInFailed, match="signature"):
            oidc.id_token_claims(oidc.provider_named("test"), metadata, token, nonce="n-123")


def test_only_existing_accounts_when_creation_is_off(provider, settings):
    settings.PMD_SIGNIN_CREATE_USERS = False
    provider.person("carla", groups=[])
    provider.person("dora", groups=[])
    make_user("dora")
    _, refused, _ = sign_in(provider, "carla")
    assert refused.status_code == 403 and b"only existing accounts" in refused.content
    assert not get_user_model().objects.filter(username="carla").exists()
    _, refused, _ = sign_in(provider, "dora")  # an account of that name is not enough ...
    assert refused.status_code == 403 and b"pmd user link dora" in refused.content
    identity_link(username="dora", provider="openid:test", subject="dora", access=Access.local_user())
    client, answer, _ = sign_in(provider, "dora")  # ... an administrator's link is
    assert answer.status_code == 302 and signed_in_as(client) == "dora"
    assert AuditEvent.objects.filter(action="user.link", target="dora").exists()


def test_a_preferred_username_equal_to_a_local_account_does_not_take_it_over(provider):
    local = make_user("gabe", password="gabe's own password")
    provider.person("gabe", groups=[])
    client, answer, _ = sign_in(provider, "gabe")
    assert answer.status_code == 403 and b"already exists" in answer.content
    assert signed_in_as(client) is None and not ExternalIdentity.objects.filter(user=local).exists()


def test_an_answer_with_another_sign_ins_code_is_refused_in_words(provider):
    provider.person("hedda", groups=[])
    other = Client()
    start = other.get("/accounts/oidc/test/login/")
    code = parse_qs(urlsplit(provider.sign_in(start["Location"], "hedda")).query)["code"][0]
    client = Client()
    own = client.get("/accounts/oidc/test/login/")
    state = parse_qs(urlsplit(own["Location"]).query)["state"][0]
    answer = client.get(f"/accounts/oidc/test/callback/?code={code}&state={state}")
    assert answer.status_code == 400 and b"did not exchange the code" in answer.content
    assert signed_in_as(client) is None


def test_the_local_admin_is_never_taken_over(provider):
    make_user("admin", superuser=True)
    provider.person("admin", groups=[])
    client, answer, _ = sign_in(provider, "admin")
    assert answer.status_code == 403 and signed_in_as(client) is None


def test_a_deactivated_account_cannot_sign_in_and_its_tokens_stop(provider):
    provider.person("eve", groups=[])
    sign_in(provider, "eve")
    eve = get_user_model().objects.get(username="eve")
    raw = make_token(eve)
    api = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.get("/api/collections").status_code == 200
    eve.is_active = False
    eve.save()
    assert api.get("/api/collections").status_code == 401
    _, answer, _ = sign_in(provider, "eve")
    assert answer.status_code == 403 and b"deactivated" in answer.content


def test_sign_out_ends_the_provider_session_too(provider):
    provider.person("fritz", groups=[])
    client, _, _ = sign_in(provider, "fritz")
    out = client.post("/accounts/logout/")
    assert out.status_code == 302
    target = urlsplit(out["Location"])
    assert f"{target.scheme}://{target.netloc}".startswith(provider.issuer)
    query = parse_qs(target.query)
    assert query["post_logout_redirect_uri"] == ["http://testserver/accounts/login/"] and query["id_token_hint"]
    assert signed_in_as(client) is None


def test_password_login_off_leaves_only_the_break_glass_admin(provider, settings):
    settings.PMD_PASSWORD_LOGIN = False
    settings.PMD_PASSWORD_LOGIN_USERS = ["admin"]
    make_user("admin", password="break glass 123", superuser=True)
    make_user("gina", password="gina password 1")
    page = Client().get("/accounts/login/").content.decode()
    assert "Sign in with Test IdP" in page and 'name="password"' not in page
    assert 'name="password"' in Client().get("/accounts/login/?password=1").content.decode()
    refused = Client().post("/accounts/login/", {"username": "gina", "password": "gina password 1"})
    assert refused.status_code == 200  # the form again, with its error
    admin = Client()
    assert admin.post("/accounts/login/", {"username": "admin", "password": "break glass 123"}).status_code == 302


def test_status_names_the_providers_and_whether_discovery_answers(provider, settings):
    from pmd_site.reports.status import status_report

    settings.PMD_OIDC_PROVIDERS = [
        provider.settings(),
        provider.settings(id="gone", name="Gone", issuer="http://127.0.0.1:9/"),
    ]
    report = status_report(["sign_in"], internals=True, access=Access.local_user())["sign_in"]
    answers = {p["id"]: p["discovery"] for p in report["openid_providers"]}
    assert answers["test"] == "answering" and answers["gone"].startswith("not answering")
    assert report["ok"] is False and report["password_login"] is True and report["forward_auth"] is False


def test_the_admin_lists_who_signs_in_through_which_provider(provider):
    from tests.support.factories import web_client

    provider.person("hugo", groups=[])
    sign_in(provider, "hugo")
    page = web_client(make_user("root", superuser=True)).get("/admin/indexing/externalidentity/")
    assert page.status_code == 200 and "openid:test" in page.content.decode() and "hugo" in page.content.decode()
    assert web_client(make_user("boss", staff=True)).get("/admin/indexing/externalidentity/").status_code == 403


def test_a_refusal_at_the_provider_and_a_foreign_next_address(provider, client):
    start = client.get("/accounts/oidc/test/login/?next=https://evil.example/")
    state = parse_qs(urlsplit(start["Location"]).query)["state"][0]
    refused = client.get(f"/accounts/oidc/test/callback/?error=access_denied&error_description=nope&state={state}")
    assert refused.status_code == 400 and b"refused the sign-in: nope" in refused.content
    provider.person("ines", groups=[])
    _, answer, _ = sign_in(provider, "ines", next_url="https://evil.example/")
    assert answer.status_code == 302 and answer["Location"] == "/"


def test_the_web_server_loads_the_sign_in_libraries_only_when_someone_signs_in():
    """Authlib and joserfc cost every web process 17 MB (memory)."""
    import subprocess
    import sys

    probe = (
        "import django, sys; django.setup(); import pmd_site.urls, pmd_site.asgi; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'authlib', 'joserfc'}))"
    )
    env = {**__import__("os").environ, "DJANGO_SETTINGS_MODULE": "pmd_site.settings"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
