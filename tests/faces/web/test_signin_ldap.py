"""LDAP sign-in against a real slapd on loopback (started once for the module): the password form
binds through django-auth-ldap, the directory's groups map to pmd's like every provider's."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from indexing.access import Access, visible_collection_names
from indexing.models import AuditEvent, ExternalIdentity
from indexing.services.sharing import collection_share
from tests.support.factories import make_group, make_user, make_vault
from tests.support.slapd import start_directory, stop_directory

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def directory(tmp_path_factory):
    started = start_directory(tmp_path_factory.mktemp("slapd"))
    yield started
    stop_directory(started)


@pytest.fixture(autouse=True)
def ldap_configured(directory, settings):
    for name, value in directory.settings().items():
        setattr(settings, name, value)
    settings.PMD_LDAP_URL = directory.url
    settings.AUTHENTICATION_BACKENDS = [
        "pmd_site.security.LoginThrottleBackend",
        "pmd_site.signin.ldap.LdapBackend",
        "pmd_site.signin.backends.PasswordBackend",
        "pmd_site.signin.backends.ProviderBackend",
    ]


def log_in(name: str, password: str) -> Client:
    client = Client()
    response = client.post("/accounts/login/", {"username": name, "password": password})
    client.status = response.status_code
    return client


def test_a_directory_password_signs_in_with_the_directory_groups(directory, tmp_path, settings):
    settings.PMD_COLLECTION_ROOTS = [tmp_path]
    make_vault(tmp_path / "lab", {"a.md": "# Lab\n\nassay\n"}, name="lab")
    make_group("research")
    collection_share(name="lab", access=Access.local_user(), visibility="shared", groups=["research"])
    directory.person("lena", "lena directory pw", groups=["research", "staff-all"])
    assert log_in("lena", "lena directory pw").status == 302
    lena = get_user_model().objects.get(username="lena")
    assert not lena.has_usable_password() and lena.email == "lena@example.org"
    assert set(lena.groups.values_list("name", flat=True)) == {"research", "staff-all"}
    assert ExternalIdentity.objects.get(user=lena).subject == "uid=lena,ou=people,dc=example,dc=org"
    assert visible_collection_names(Access.for_user(lena)) == ["lab"]

    directory.person("lena", "lena directory pw", groups=["staff-all"])  # left research in the directory
    assert log_in("lena", "lena directory pw").status == 302
    assert visible_collection_names(Access.for_user(lena)) == []
    assert AuditEvent.objects.filter(
        action="user.groups", target="lena", detail__removed=["research"], detail__via="ldap"
    ).exists()


def test_a_wrong_directory_password_is_refused(directory):
    directory.person("milo", "milo directory pw", groups=[])
    assert log_in("milo", "not the password").status == 200
    assert not get_user_model().objects.filter(username="milo").exists()


def test_ldap_works_with_password_login_off_and_the_form_shows(directory, settings):
    settings.PMD_PASSWORD_LOGIN = False
    make_user("nora", password="local only pw 1")
    directory.person("otto", "otto directory pw", groups=[])
    assert 'name="password"' in Client().get("/accounts/login/").content.decode()
    assert log_in("otto", "otto directory pw").status == 302
    assert log_in("nora", "local only pw 1").status == 200  # a local password: off


def test_the_login_lockout_counts_directory_passwords_too(directory, settings):
    settings.AXES_FAILURE_LIMIT = 3
    directory.person("pia", "pia directory pw", groups=[])
    for _ in range(2):
        assert log_in("pia", "guess").status == 200
    assert log_in("pia", "guess").status == 429
    assert log_in("pia", "pia directory pw").status == 429  # locked: the right password too
