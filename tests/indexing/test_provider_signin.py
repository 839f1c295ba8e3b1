"""The one sign-in service every identity provider path uses (OpenID, forward auth, LDAP): which
account, which groups (prefix, allow-list), which role, and the audit of each change."""

from __future__ import annotations

import pytest

from indexing import errors
from indexing.access import Access
from indexing.models import AuditEvent, ExternalIdentity
from indexing.services.accounts import ProviderSignIn, identity_link, provider_sign_in
from tests.support.factories import make_group, make_user

pytestmark = pytest.mark.django_db


def signin(name="hana", groups=None, provider="openid:test", subject=None):
    return provider_sign_in(
        signin=ProviderSignIn(provider=provider, subject=subject or f"sub-{name}", username=name, groups=groups)
    )


def names(user):
    return set(user.groups.values_list("name", flat=True))


def test_a_prefix_keeps_the_providers_other_groups_out_and_local_groups_untouched(settings):
    settings.PMD_GROUPS_PREFIX = "pmd-"
    user = signin(groups=["pmd-research", "domain-users", "vpn"])
    assert names(user) == {"pmd-research"}
    make_group("book-club", user)  # given by an admin in pmd: not the provider's to take away
    user = signin(groups=["pmd-ops"])
    assert names(user) == {"pmd-ops", "book-club"}


def test_an_allow_list(settings):
    settings.PMD_GROUPS_ALLOWED = ["research", "ops"]
    assert names(signin(groups=["research", "wheel", "ops"])) == {"research", "ops"}


def test_no_groups_claim_leaves_memberships_alone():
    user = signin(groups=["research"])
    assert names(signin(groups=None)) == {"research"}
    assert names(signin(groups=[])) == set() and user.pk == signin().pk


def test_staff_and_superuser_follow_the_providers_groups(settings):
    settings.PMD_STAFF_GROUPS = ["editors"]
    settings.PMD_SUPERUSER_GROUPS = ["pmd-admins"]
    user = signin(groups=["editors"])
    assert user.is_staff and not user.is_superuser
    user = signin(groups=["pmd-admins"])
    assert user.is_staff and user.is_superuser
    user = signin(groups=[])
    assert not user.is_staff and not user.is_superuser
    roles = [e.detail["role"] for e in AuditEvent.objects.filter(action="user.role").order_by("at", "id")]
    assert roles == ["staff", "superuser", "member"]


def test_roles_are_the_admins_without_those_settings():
    make_user("ivan", staff=True)
    identity_link(username="ivan", provider="forward-auth", subject="sub-ivan", access=Access.local_user())
    assert signin("ivan", groups=[], provider="forward-auth").is_staff


def test_the_subject_not_the_name_decides_the_account():
    first = signin("jo", subject="123")
    renamed = signin("joanna", subject="123")  # renamed at the provider: still the same account
    assert renamed.pk == first.pk and renamed.get_username() == "jo"
    with pytest.raises(errors.SignInRefused, match="already exists"):
        signin("jo", subject="456")  # someone else now calling themself jo


def test_a_subject_is_the_person_only_within_the_issuer_that_vouched_for_it(settings):
    """The same `sub` from another issuer (a provider id pointed at another server) is not the
    person the account was linked to; an admin's link again lets the next issuer vouch."""
    settings.PMD_OIDC_PROVIDERS = [{"id": "test"}]

    def from_issuer(issuer: str):
        return provider_sign_in(
            signin=ProviderSignIn(provider="openid:test", subject="42", username="mo", issuer=issuer)
        )

    mo = from_issuer("https://id.example.org")
    assert from_issuer("https://id.example.org").pk == mo.pk
    with pytest.raises(errors.SignInRefused, match="linked through the issuer https://id.example.org"):
        from_issuer("https://evil.example.net")
    identity_link(username="mo", provider="openid:test", subject="42", access=Access.local_user())
    assert from_issuer("https://new.example.org").pk == mo.pk  # the admin's word: the new issuer vouches
    assert ExternalIdentity.objects.get(subject="42").issuer == "https://new.example.org"
    with pytest.raises(errors.SignInRefused):
        from_issuer("https://id.example.org")


def test_a_name_pmd_cannot_hold_is_cleaned():
    assert signin("K. O'Brien (ops)").get_username() == "K.OBrienops"


def test_groups_created_and_changes_audited():
    signin(groups=["alpha"])
    assert AuditEvent.objects.filter(action="group.create", target="alpha", detail__via="openid:test").exists()
    event = AuditEvent.objects.get(action="user.groups")
    assert event.detail == {"added": ["alpha"], "removed": [], "via": "openid:test"} and event.actor_label == "pmd"


def test_a_name_that_cleans_to_an_existing_account_is_refused_not_merged():
    staffy = make_user("staffy", staff=True)
    with pytest.raises(errors.SignInRefused, match="'staffy' already exists"):
        signin("staffy!", provider="forward-auth", subject="staffy!")
    with pytest.raises(errors.SignInRefused, match="already exists"):
        signin("STAFFY", provider="forward-auth", subject="STAFFY")  # names differing only in case
    assert not ExternalIdentity.objects.filter(user=staffy).exists()


def test_an_existing_account_is_taken_only_once_an_admin_links_it(settings):
    settings.PMD_OIDC_PROVIDERS = [{"id": "test"}]
    dora = make_user("dora", password="dora's own password")
    with pytest.raises(errors.SignInRefused, match="pmd user link dora --provider openid:test --subject sub-dora"):
        signin("dora")  # a provider's preferred_username equal to a local account's name
    identity_link(username="dora", provider="openid:test", subject="sub-dora", access=Access.local_user())
    assert signin("dora").pk == dora.pk
    assert AuditEvent.objects.filter(action="user.link", target="dora", detail__subject="sub-dora").exists()


def test_a_link_names_a_known_provider_and_never_moves_someone_elses(settings):
    settings.PMD_OIDC_PROVIDERS = [{"id": "test"}]
    make_user("dora")
    signin("kim", subject="k-1")
    with pytest.raises(errors.InvalidAccount, match="already signs in as 'kim'"):
        identity_link(username="dora", provider="openid:test", subject="k-1", access=Access.local_user())
    with pytest.raises(errors.InvalidAccount, match="unknown identity provider"):
        identity_link(username="dora", provider="openid:other", subject="x", access=Access.local_user())


def test_names_pmd_stores_differently_are_one_name():
    """Django stores names NFKC-normalized: the compatibility form of a taken name is refused."""
    signin("ﬁona", subject="f-1")  # the "ﬁ" ligature: stored as "fiona"
    with pytest.raises(errors.SignInRefused, match="already exists"):
        signin("fiona", subject="f-2")


def test_a_subject_longer_than_pmd_keeps_is_refused():
    with pytest.raises(errors.SignInRefused, match="longer than 255 characters"):
        signin("x" * 300, provider="forward-auth", subject="x" * 300)
