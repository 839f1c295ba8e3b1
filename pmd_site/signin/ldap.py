"""LDAP sign-in (the `ldap` extra): django-auth-ldap binds and searches; the account, its groups
and its role come from the same `provider_sign_in` as every other provider's.

Only loaded when PMD_LDAP_URL is set (pmd_site.settings puts it in AUTHENTICATION_BACKENDS).
The password form serves it, so django-axes' lockout applies to it as to local passwords.
"""

from __future__ import annotations

import logging

from django_auth_ldap.backend import LDAPBackend

from indexing import errors
from indexing.services.accounts import ProviderSignIn, provider_sign_in

log = logging.getLogger(__name__)


class LdapBackend(LDAPBackend):
    """django-auth-ldap's bind and search; the directory's entry then goes through pmd's one
    sign-in rule (its DN is the stable subject, its groups are mapped and audited)."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        try:
            return super().authenticate(request, username=username, password=password, **kwargs)
        except errors.SignInRefused as exc:
            log.warning("LDAP sign-in of %r refused: %s", username, exc)
            return None

    def get_or_build_user(self, username, ldap_user):
        mail = ldap_user.attrs.get("mail") or [""]
        groups = sorted(ldap_user.group_names) if self.settings.GROUP_SEARCH is not None else None
        user = provider_sign_in(
            signin=ProviderSignIn(
                provider="ldap", subject=ldap_user.dn.lower(), username=username, email=mail[0], groups=groups
            )
        )
        return user, False  # made (or found) by pmd: nothing left for django-auth-ldap to build
