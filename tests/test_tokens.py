"""API tokens: stored as digests only, shown once, revocable, usable from the CLI."""

from __future__ import annotations

import hashlib

import pytest

from indexing.models import ApiToken
from indexing.services.tokens import TokenError, bearer_token, token_authenticate, token_create, token_revoke
from indexing.access import Access


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice-123")


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
    with pytest.raises(TokenError, match="no user named 'nobody'"):
        token_create(user="nobody", access=Access.local_user(), can_write=True)
    with pytest.raises(TokenError, match="no token matches"):
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
