"""The one sign-in service every identity provider path uses (OpenID, forward auth, LDAP): which
account, which groups (prefix, allow-list), which role, and the audit of each change."""

from __future__ import annotations

import pytest

from indexing import errors
from indexing.models import AuditEvent
from indexing.services.accounts import ProviderSignIn, provider_sign_in
from tests.support.factories import make_group, make_user

pytestmark = pytest.mark.django_db


def signin(name="hana", groups=None, provider="openid:test", subject=None):
    return provider_sign_in(signin=ProviderSignIn(provider=provider, subject=subject or f"sub-{name}",
                                                  username=name, groups=groups))


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
    assert signin("ivan", groups=[]).is_staff


def test_the_subject_not_the_name_decides_the_account():
    first = signin("jo", subject="123")
    renamed = signin("joanna", subject="123")  # renamed at the provider: still the same account
    assert renamed.pk == first.pk and renamed.get_username() == "jo"
    with pytest.raises(errors.SignInRefused, match="another person"):
        signin("jo", subject="456")  # someone else now calling themself jo


def test_a_name_pmd_cannot_hold_is_cleaned():
    assert signin("K. O'Brien (ops)").get_username() == "K.OBrienops"


def test_groups_created_and_changes_audited():
    signin(groups=["alpha"])
    assert AuditEvent.objects.filter(action="group.create", target="alpha", detail__via="openid:test").exists()
    event = AuditEvent.objects.get(action="user.groups")
    assert event.detail == {"added": ["alpha"], "removed": [], "via": "openid:test"} and event.actor_label == "pmd"
