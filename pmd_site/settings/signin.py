"""Signing in: passwords, lockouts and token throttling, the team's identity providers (OpenID
Connect, forward auth, LDAP) and the groups they bring."""

from __future__ import annotations

from indexing.errors import ConfigError
from pmd_site import env
from pmd_site.settings.table import read

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# --- Login throttling (django-axes), bearer-token throttling ----------------------------
AUTHENTICATION_BACKENDS = [
    "pmd_site.security.LoginThrottleBackend",  # refuses locked-out logins before checking passwords
    "pmd_site.signin.backends.PasswordBackend",  # the password form (PMD_PASSWORD_LOGIN)
    "pmd_site.signin.backends.ProviderBackend",  # sessions begun by a provider or the proxy
]
PMD_LOGIN_FAILURE_LIMIT = read("PMD_LOGIN_FAILURE_LIMIT")
PMD_LOGIN_COOLOFF_MINUTES = read("PMD_LOGIN_COOLOFF_MINUTES")
AXES_ENABLED = PMD_LOGIN_FAILURE_LIMIT > 0
AXES_FAILURE_LIMIT = max(PMD_LOGIN_FAILURE_LIMIT, 1)
AXES_COOLOFF_TIME = PMD_LOGIN_COOLOFF_MINUTES / 60  # hours
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # either one reaching the limit locks
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False  # a lockout ends on time, however hard it is hammered
AXES_CLIENT_IP_CALLABLE = "pmd_site.security.client_address"
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False  # its "AXES: BEGIN" line, once per process start (four times per `pmd up`), told nobody anything
AXES_DISABLE_ACCESS_LOG = True  # no ever-growing table of successful logins (last_login is kept anyway)
PMD_TOKEN_FAILURE_LIMIT = read("PMD_TOKEN_FAILURE_LIMIT")
PMD_TOKEN_COOLOFF_MINUTES = read("PMD_TOKEN_COOLOFF_MINUTES")
# --- Team sign-in: OpenID Connect providers, forward auth, LDAP, the groups they bring -------
# First sign-in through a provider creates the account (false: only accounts an admin made).
PMD_SIGNIN_CREATE_USERS = read("PMD_SIGNIN_CREATE_USERS")
# The claim (OpenID) holding the person's groups; the proxy's header is PMD_FORWARD_AUTH_GROUPS_HEADER.
PMD_GROUPS_CLAIM = read("PMD_GROUPS_CLAIM")
# Only these provider groups become pmd groups (a prefix, an allow-list; neither: all of them).
PMD_GROUPS_PREFIX = read("PMD_GROUPS_PREFIX")
PMD_GROUPS_ALLOWED = read("PMD_GROUPS_ALLOWED")
# Members of these provider groups are staff / superusers (set: recomputed at every sign-in).
PMD_STAFF_GROUPS = read("PMD_STAFF_GROUPS")
PMD_SUPERUSER_GROUPS = read("PMD_SUPERUSER_GROUPS")
# false: the password form only for the break-glass accounts named in PMD_PASSWORD_LOGIN_USERS.
PMD_PASSWORD_LOGIN = read("PMD_PASSWORD_LOGIN")
PMD_PASSWORD_LOGIN_USERS = read("PMD_PASSWORD_LOGIN_USERS")
PMD_FORWARD_AUTH = read("PMD_FORWARD_AUTH")
PMD_FORWARD_AUTH_PROXIES = read("PMD_FORWARD_AUTH_PROXIES")
if PMD_FORWARD_AUTH and not PMD_FORWARD_AUTH_PROXIES:
    raise ConfigError("PMD_FORWARD_AUTH=true needs PMD_FORWARD_AUTH_PROXIES: the proxy's addresses or networks")
PMD_FORWARD_AUTH_USER_HEADER = read("PMD_FORWARD_AUTH_USER_HEADER")
PMD_FORWARD_AUTH_GROUPS_HEADER = read("PMD_FORWARD_AUTH_GROUPS_HEADER")
PMD_FORWARD_AUTH_EMAIL_HEADER = read("PMD_FORWARD_AUTH_EMAIL_HEADER")
PMD_FORWARD_AUTH_LOGOUT_URL = read("PMD_FORWARD_AUTH_LOGOUT_URL")
# OpenID Connect: PMD_OIDC_PROVIDERS=authentik,keycloak, then PMD_OIDC_<ID>_ISSUER, _CLIENT_ID,
# _CLIENT_SECRET, _SCOPES, _NAME (the button's label) and _USERNAME_CLAIM for each.
PMD_OIDC_PROVIDERS = env.get_oidc_providers()
PMD_OIDC_TIMEOUT = read("PMD_OIDC_TIMEOUT")
# LDAP (the ldap extra): django-auth-ldap binds as PMD_LDAP_BIND_DN and searches for the person.
PMD_LDAP_URL = read("PMD_LDAP_URL")
if PMD_LDAP_URL:
    try:
        import ldap
        from django_auth_ldap.config import GroupOfNamesType, GroupOfUniqueNamesType, LDAPSearch, PosixGroupType
    except ImportError:
        raise ConfigError("PMD_LDAP_URL needs the ldap extra: pip install 'pmd[ldap]'") from None
    AUTH_LDAP_SERVER_URI = PMD_LDAP_URL
    AUTH_LDAP_BIND_DN = read("PMD_LDAP_BIND_DN")
    AUTH_LDAP_BIND_PASSWORD = read("PMD_LDAP_BIND_PASSWORD")
    AUTH_LDAP_START_TLS = read("PMD_LDAP_START_TLS")
    AUTH_LDAP_USER_SEARCH = LDAPSearch(read("PMD_LDAP_USER_SEARCH"), ldap.SCOPE_SUBTREE, read("PMD_LDAP_USER_FILTER"))
    if read("PMD_LDAP_GROUP_SEARCH"):
        _group_types = {
            "groupOfNames": GroupOfNamesType,
            "groupOfUniqueNames": GroupOfUniqueNamesType,
            "posixGroup": PosixGroupType,
        }
        _group_type = read("PMD_LDAP_GROUP_TYPE")  # one of the table's choices: a key above
        AUTH_LDAP_GROUP_SEARCH = LDAPSearch(
            read("PMD_LDAP_GROUP_SEARCH"), ldap.SCOPE_SUBTREE, f"(objectClass={_group_type})"
        )
        AUTH_LDAP_GROUP_TYPE = _group_types[_group_type](name_attr="cn")
    AUTHENTICATION_BACKENDS.insert(1, "pmd_site.signin.ldap.LdapBackend")  # after the lockout check
