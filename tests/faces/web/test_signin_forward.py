"""Forward authentication: the trusted proxy's Remote-User / Remote-Groups / Remote-Email sign
people in; the same headers from any other address are ignored."""

from __future__ import annotations

import ipaddress

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from indexing.access import Access, visible_collection_names
from indexing.models import AuditEvent
from indexing.services.accounts import identity_link
from indexing.services.sharing import collection_share
from tests.support.factories import make_group, make_user, make_vault

pytestmark = pytest.mark.django_db
PROXY = "10.9.0.3"  # only an address written into requests: no traffic goes anywhere


@pytest.fixture(autouse=True)
def forward_auth(settings):
    settings.PMD_FORWARD_AUTH = True
    settings.PMD_FORWARD_AUTH_PROXIES = [ipaddress.ip_network("10.9.0.0/24"), ipaddress.ip_network("::1")]


def from_proxy(user="carol", groups="research,choir", email="carol@example.org", address=PROXY, **extra):
    headers = {"HTTP_REMOTE_USER": user, "HTTP_REMOTE_EMAIL": email, **extra}
    if groups is not None:
        headers["HTTP_REMOTE_GROUPS"] = groups
    return Client(REMOTE_ADDR=address, **headers)


def who(client) -> str | None:
    response = client.get("/")
    return response.context["user"].get_username() if response.status_code == 200 else None


def test_the_proxy_signs_people_in_with_their_groups():
    client = from_proxy()
    assert who(client) == "carol"
    carol = get_user_model().objects.get(username="carol")
    assert carol.email == "carol@example.org" and not carol.has_usable_password()
    assert set(carol.groups.values_list("name", flat=True)) == {"research", "choir"}
    assert AuditEvent.objects.filter(action="user.create", target="carol", detail__via="forward-auth").exists()


@pytest.mark.parametrize("address", ["127.0.0.1", "10.9.1.3", "192.0.2.7", "::2"])
def test_headers_from_any_other_address_are_ignored(address):
    client = from_proxy(user="admin", address=address)
    response = client.get("/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert not get_user_model().objects.filter(username="admin").exists()


def test_x_forwarded_for_does_not_make_a_client_the_proxy(settings):
    settings.PMD_BEHIND_HTTPS_PROXY = True
    client = from_proxy(address="127.0.0.1", HTTP_X_FORWARDED_FOR=PROXY)
    assert client.get("/").status_code == 302


def test_headers_count_only_when_forward_auth_is_on(settings):
    settings.PMD_FORWARD_AUTH = False
    assert from_proxy().get("/").status_code == 302


def test_header_names_are_configurable(settings):
    settings.PMD_FORWARD_AUTH_USER_HEADER = "X-Forwarded-User"
    settings.PMD_FORWARD_AUTH_GROUPS_HEADER = "X-Forwarded-Groups"
    client = Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_USER="dana", HTTP_X_FORWARDED_GROUPS="ops")
    assert who(client) == "dana"
    assert list(get_user_model().objects.get(username="dana").groups.values_list("name", flat=True)) == ["ops"]
    assert who(from_proxy(user="ignored-now")) is None  # Remote-User is no longer the header


def test_group_changes_at_the_proxy_follow_at_once(tmp_path, settings):
    settings.PMD_COLLECTION_ROOTS = [tmp_path]
    make_vault(tmp_path / "lab", {"a.md": "# Lab\n\nassay\n"}, name="lab")
    make_group("research")
    collection_share(name="lab", access=Access.local_user(), visibility="shared", groups=["research"])
    client = from_proxy()
    assert who(client) == "carol"
    carol = get_user_model().objects.get(username="carol")
    assert visible_collection_names(Access.for_user(carol)) == ["lab"]
    # The proxy now sends other groups on the same session: the next request maps them.
    client.defaults["HTTP_REMOTE_GROUPS"] = "choir"
    assert who(client) == "carol"
    assert visible_collection_names(Access.for_user(carol)) == []
    # ... and another person on the same browser is signed in as that person.
    client.defaults["HTTP_REMOTE_USER"] = "dora"
    assert who(client) == "dora"


def test_a_deactivated_account_is_refused():
    make_user("erin", is_active=False)
    identity_link(username="erin", provider="forward-auth", subject="erin", access=Access.local_user())
    response = from_proxy(user="erin").get("/")
    assert response.status_code == 403 and b"deactivated" in response.content


def test_the_local_admin_is_not_taken_over_by_a_header():
    make_user("admin", superuser=True)
    assert from_proxy(user="admin").get("/").status_code == 403


def test_proxies_and_providers_are_read_from_the_environment(monkeypatch):
    from indexing.errors import ConfigError
    from pmd_site import env

    monkeypatch.setenv("PMD_FORWARD_AUTH_PROXIES", "172.18.0.0/16, 10.0.0.5 ,::1")
    assert [str(n) for n in env.get_networks("PMD_FORWARD_AUTH_PROXIES")] == ["172.18.0.0/16", "10.0.0.5/32", "::1/128"]
    monkeypatch.setenv("PMD_FORWARD_AUTH_PROXIES", "traefik")
    with pytest.raises(ConfigError, match="not an address"):
        env.get_networks("PMD_FORWARD_AUTH_PROXIES")

    monkeypatch.setenv("PMD_OIDC_PROVIDERS", "authentik,pocket-id")
    monkeypatch.setenv("PMD_OIDC_AUTHENTIK_ISSUER", "https://auth.example.org/application/o/pmd/")
    monkeypatch.setenv("PMD_OIDC_AUTHENTIK_CLIENT_ID", "abc")
    monkeypatch.setenv("PMD_OIDC_AUTHENTIK_SCOPES", "email groups")
    monkeypatch.setenv("PMD_OIDC_POCKET_ID_ISSUER", "https://id.example.org")
    with pytest.raises(ConfigError, match="PMD_OIDC_POCKET_ID_CLIENT_ID"):
        env.get_oidc_providers()
    monkeypatch.setenv("PMD_OIDC_POCKET_ID_CLIENT_ID", "def")
    monkeypatch.setenv("PMD_OIDC_POCKET_ID_NAME", "Pocket ID")
    first, second = env.get_oidc_providers()
    assert first["id"] == "authentik" and first["name"] == "authentik" and first["scopes"] == "openid email groups"
    assert second["id"] == "pocket-id" and second["name"] == "Pocket ID" and second["client_secret"] == ""


def test_status_warns_about_trusting_every_address_and_about_no_way_in(settings):
    from pmd_site.reports.safety import unsafe_settings

    settings.PMD_FORWARD_AUTH_PROXIES = [ipaddress.ip_network("0.0.0.0/0")]
    assert any("every client is trusted" in w for w in unsafe_settings(settings))
    settings.PMD_TRUSTED_PROXIES = [ipaddress.ip_network("::/0")]
    assert any("every client may name its own address" in w for w in unsafe_settings(settings))
    settings.PMD_FORWARD_AUTH = False
    settings.PMD_PASSWORD_LOGIN = False
    settings.PMD_OIDC_PROVIDERS = []
    assert any("only the break-glass accounts" in w for w in unsafe_settings(settings))


def as_sent(name: str) -> str:
    """A header value as the web server hands it to Django: its UTF-8 bytes read as latin-1."""
    return name.encode("utf-8").decode("latin-1")


def test_names_are_read_as_utf_8():
    assert who(from_proxy(user=as_sent("José"), groups=None)) == "José"
    assert who(from_proxy(user=as_sent("рус"), groups=None)) == "рус"
    assert who(from_proxy(user=as_sent("сут"), groups=None)) == "сут"  # another person, not refused
    assert get_user_model().objects.filter(username__in=["José", "рус", "сут"]).count() == 3


def test_a_header_that_is_not_utf_8_is_refused():
    response = from_proxy(user="Jos\xe9", groups=None).get("/")  # latin-1 bytes, as a server hands them on
    assert response.status_code == 403 and b"not UTF-8" in response.content


def test_a_name_that_cleans_to_a_local_account_does_not_sign_in_as_it(run_cli):
    staffy = make_user("staffy", staff=True)
    refused = from_proxy(user="staffy!", groups=None).get("/")
    assert refused.status_code == 403 and b"already exists" in refused.content
    # Not linked by the attempt: the account's name at the proxy still is not enough ...
    assert from_proxy(user="staffy", groups=None).get("/").status_code == 403
    # ... until an administrator links it.
    code, out, _ = run_cli("user", "link", "staffy", "--provider", "forward-auth", "--subject", "staffy")
    assert code == 0 and "signs in as staffy" in out
    assert who(from_proxy(user="staffy", groups=None)) == "staffy"
    assert get_user_model().objects.get(username="staffy").pk == staffy.pk
    assert from_proxy(user="staffy!", groups=None).get("/").status_code == 403


def test_a_name_longer_than_pmd_keeps_is_refused_in_words():
    response = from_proxy(user="m" * 300).get("/")
    assert response.status_code == 403 and b"longer than 255 characters" in response.content


# --- through the web server `pmd serve` runs (uvicorn on loopback) ---------------------------


@pytest.fixture
def served(settings):
    """pmd_site.asgi under uvicorn with `pmd serve`'s options, in a thread: its URL."""
    from pmd_site.cli.services import server_options
    from tests.support.mcp_client import serve_asgi

    settings.PMD_BEHIND_HTTPS_PROXY = True
    settings.PMD_SUPERUSER_GROUPS = ["pmd-admins"]
    with serve_asgi(**server_options()) as url:
        yield url


def _get_status(url: str, **headers):
    import httpx

    return httpx.get(f"{url}/status/", headers=headers, follow_redirects=False, timeout=30)


@pytest.mark.django_db(transaction=True)
def test_a_forged_x_forwarded_for_naming_the_proxy_signs_no_one_in(served, settings):
    settings.PMD_FORWARD_AUTH_PROXIES = [ipaddress.ip_network("10.9.9.9")]
    response = _get_status(
        served, **{"X-Forwarded-For": "10.9.9.9", "Remote-User": "mallory", "Remote-Groups": "pmd-admins"}
    )
    assert response.status_code == 302 and response.headers["location"].startswith("/accounts/login/")
    assert not get_user_model().objects.filter(username="mallory").exists()


@pytest.mark.django_db(transaction=True)
def test_a_proxy_on_the_same_host_signs_people_in_and_names_the_client(served, settings):
    from indexing.models import TokenFailure

    settings.PMD_FORWARD_AUTH_PROXIES = [ipaddress.ip_network("127.0.0.1")]
    response = _get_status(served, **{"X-Forwarded-For": "203.0.113.9", "Remote-User": "bob"})
    assert response.status_code == 200 and get_user_model().objects.filter(username="bob").exists()
    # The address lockouts and throttles count is the client the proxy names, not the proxy.
    import httpx

    refused = httpx.get(
        f"{served}/api/collections",
        timeout=30,
        headers={"X-Forwarded-For": "203.0.113.9", "Authorization": "Bearer wrong"},
    )
    assert refused.status_code == 401
    assert list(TokenFailure.objects.values_list("address", flat=True)) == ["203.0.113.9"]
