"""API tokens: stored as digests only, shown once, revocable, usable from the CLI."""

from __future__ import annotations

import hashlib

import pytest

from indexing.access import Access
from indexing.errors import TokenNotFound, UserNotFound
from indexing.models import ApiToken
from indexing.services.tokens import bearer_token, token_authenticate, token_create, token_revoke
from tests.support.factories import make_user


@pytest.fixture
def alice(django_user_model):
    return make_user("alice")


def test_token_is_stored_as_sha256_digest_only(alice):
    created = token_create(user=alice, name="script", access=Access.local_user(), can_write=True)
    row = ApiToken.objects.get(pk=created.token.pk)
    assert created.raw.startswith("pmd_")
    assert row.digest == hashlib.sha256(created.raw.encode()).hexdigest()
    assert created.raw not in {row.digest, row.prefix, row.name}
    assert created.raw.startswith(row.prefix) and len(row.prefix) < len(created.raw) // 3


def test_authenticate_revoke_and_inactive_user(alice):
    created = token_create(user="alice", access=Access.local_user(), can_write=True)
    assert getattr(token_authenticate(created.raw), "user", None) == alice
    assert ApiToken.objects.get(pk=created.token.pk).last_used is not None
    assert token_authenticate(created.raw + "x") is None
    assert token_authenticate("") is None and token_authenticate(None) is None
    token_revoke(token=created.token.prefix, access=Access.local_user())
    assert token_authenticate(created.raw) is None
    other = token_create(user=alice, access=Access.local_user(), can_write=True)
    alice.is_active = False
    alice.save()
    assert token_authenticate(other.raw) is None


def test_create_for_unknown_user_and_revoke_unknown_token(db):
    with pytest.raises(UserNotFound, match="^no user named 'nobody'$"):
        token_create(user="nobody", access=Access.local_user(), can_write=True)
    with pytest.raises(TokenNotFound, match="no token matches"):
        token_revoke(token="pmd_nothing", access=Access.local_user())


def test_bearer_header_parsing():
    assert bearer_token("Bearer pmd_abc") == "pmd_abc"
    assert bearer_token("bearer   pmd_abc ") == "pmd_abc"
    assert bearer_token("Basic xyz") is None
    assert bearer_token(None) is None


def test_cli_create_list_revoke(alice, run_cli):
    code, out, err = run_cli("token", "create", "--user", "alice", "--name", "laptop")
    assert code == 0, err
    raw = out.strip()
    assert getattr(token_authenticate(raw), "user", None) == alice and "not shown again" in err
    code, out, _ = run_cli("token", "list")
    assert code == 0 and "laptop" in out and raw not in out
    token_id = ApiToken.objects.get(name="laptop").pk
    code, out, _ = run_cli("token", "revoke", str(token_id))
    assert code == 0 and "revoked" in out
    assert token_authenticate(raw) is None
    code, out, _ = run_cli("token", "list", "--all", "--json")
    assert code == 0 and '"revoked": null' not in out
    code, _, err = run_cli("token", "create", "--user", "ghost")
    assert code == 1 and "no user named 'ghost'" in err


# --- whose tokens a caller may make, list and revoke -------------------------------------------


@pytest.fixture
def team(django_user_model):
    return {
        "staff": make_user("sam", staff=True),
        "other": make_user("olive", staff=True),
        "root": make_user("root", superuser=True),
    }


def _login(user):
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


def test_staff_cannot_make_a_token_for_a_superuser_or_anyone_else(team, alice):
    from indexing.errors import AccessDenied

    staff = Access.for_user(team["staff"])
    for victim in (team["root"], team["other"], alice, "root"):
        with pytest.raises(AccessDenied, match="superuser"):
            token_create(user=victim, access=staff, can_write=True)
    assert not ApiToken.objects.exists()
    assert token_create(user=team["staff"], access=staff).token.user == team["staff"]
    assert token_create(user=team["staff"], access=Access.for_user(team["root"])).token.user == team["staff"]
    assert token_create(user=alice, access=Access.local_user()).token.user == alice


def test_the_admin_offers_and_makes_staff_tokens_only_for_themselves(team):
    staff_page = _login(team["staff"]).get("/admin/indexing/apitoken/add/").content.decode()
    assert 'value="%d"' % team["staff"].pk in staff_page
    assert ">root<" not in staff_page and ">olive<" not in staff_page
    form = {"name": "climb", "can_write": "on"}
    # The choice is enforced on save, not only by the form's widget: a forged POST is refused.
    forged = _login(team["staff"]).post("/admin/indexing/apitoken/add/", {**form, "user": team["root"].pk})
    assert forged.status_code == 200 and not ApiToken.objects.exists()
    own = _login(team["staff"]).post("/admin/indexing/apitoken/add/", {**form, "user": team["staff"].pk})
    assert own.status_code == 302 and ApiToken.objects.get().user == team["staff"]
    made = _login(team["root"]).post("/admin/indexing/apitoken/add/", {**form, "user": team["other"].pk})
    assert made.status_code == 302 and ApiToken.objects.filter(user=team["other"]).count() == 1
    assert ">olive<" in _login(team["root"]).get("/admin/indexing/apitoken/add/").content.decode()


def test_staff_list_and_revoke_only_their_own_tokens(team):
    roots = token_create(user=team["root"], name="root-ops", access=Access.local_user(), can_write=True)
    own = token_create(user=team["staff"], name="sam-laptop", access=Access.local_user())
    listing = _login(team["staff"]).get("/admin/indexing/apitoken/").content.decode()
    assert "sam-laptop" in listing and "root-ops" not in listing
    assert _login(team["staff"]).get(f"/admin/indexing/apitoken/{roots.token.pk}/change/").status_code == 302
    _login(team["staff"]).post(
        "/admin/indexing/apitoken/", {"action": "revoke_selected", "_selected_action": [roots.token.pk, own.token.pk]}
    )
    assert token_authenticate(roots.raw) is not None and token_authenticate(own.raw) is None
    for ref in (roots.token.pk, roots.token.prefix, roots.raw):
        with pytest.raises(TokenNotFound, match="no token matches"):
            token_revoke(token=ref, access=Access.for_user(team["staff"]))
    assert token_authenticate(roots.raw) is not None
    assert "root-ops" in _login(team["root"]).get("/admin/indexing/apitoken/").content.decode()
    token_revoke(token=roots.token.pk, access=Access.for_user(team["root"]))
    assert token_authenticate(roots.raw) is None


def test_the_web_page_makes_tokens_only_for_the_signed_in_user(team):
    response = _login(team["staff"]).post("/tokens/new/", {"name": "mine", "user": team["root"].pk, "expires": ""})
    assert response.status_code == 200, response.content
    assert list(ApiToken.objects.values_list("user__username", flat=True)) == ["sam"]
