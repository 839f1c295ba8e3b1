"""Unsafe settings pmd can see from the inside, for `pmd status` to warn about.

Each check says what is wrong and what to set instead; none of them stops pmd, because a
laptop on loopback is a fine place for most of these.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path

from pmd_site.runtime.postgres_server import SYSTEM_USER_WHEN_ROOT

# Placeholders people copy from examples and keys that ship with pmd's own tests.
KNOWN_SECRET_KEYS = frozenset(
    {
        "test-only-secret-key-not-for-production",
        "change-me",
        "changeme",
        "secret",
        "pmd",
    }
)
MIN_SECRET_KEY_LENGTH = 50  # Django's own deploy check asks for as much
MIN_SECRET_KEY_CHARACTERS = 5


def _secret_key_problem(key: str) -> str | None:
    if key in KNOWN_SECRET_KEYS or key.startswith("django-insecure") or "change" in key.lower():
        return (
            "PMD_SECRET_KEY is a well-known placeholder: set a long random value "
            "(or leave it empty for a generated one)"
        )
    if len(key) < MIN_SECRET_KEY_LENGTH or len(set(key)) < MIN_SECRET_KEY_CHARACTERS:
        return (
            f"PMD_SECRET_KEY is short or repetitive (under {MIN_SECRET_KEY_LENGTH} characters): "
            "sessions and password resets can be forged; set a long random value"
        )
    return None


def _open_to_others(path: Path) -> bool:
    try:
        return bool(stat.S_IMODE(os.stat(path).st_mode) & 0o007)
    except OSError:
        return False


def close_to_others(home: Path, settings) -> str:
    """The command that closes PMD_HOME to other users and keeps pmd working. As root the embedded
    PostgreSQL runs as its own system user, which must still enter the folder: `chmod o-rwx` alone
    locked it out, so its group keeps the right to enter (the mode pmd gives a home it creates)."""
    if os.geteuid() != 0 or not getattr(settings, "EMBEDDED_DATABASE", False):
        return f"chmod o-rwx {home}"
    try:
        group = grp.getgrgid(pwd.getpwnam(SYSTEM_USER_WHEN_ROOT).pw_gid).gr_name
    except KeyError:  # not created yet: the first start creates the user and its group
        group = SYSTEM_USER_WHEN_ROOT
    return (
        f"chgrp {group} {home} && chmod 710 {home} (the embedded PostgreSQL runs as {SYSTEM_USER_WHEN_ROOT}, "
        "which must still enter it)"
    )


def unsafe_settings(settings) -> list[str]:
    """Warnings about the given Django settings and the files under PMD_HOME."""
    warnings = []
    if settings.DEBUG:
        warnings.append("PMD_DEBUG is on: error pages show code, settings and data to anyone who can reach the server")
    problem = _secret_key_problem(settings.SECRET_KEY)
    if problem:
        warnings.append(problem)
    hosts = list(settings.ALLOWED_HOSTS)
    if not hosts:
        warnings.append("PMD_ALLOWED_HOSTS is empty: set the host names the server answers to")
    elif "*" in hosts:
        warnings.append(
            "PMD_ALLOWED_HOSTS contains '*': any Host header is accepted (DNS rebinding); list the real names"
        )
    warnings += _sign_in_problems(settings)
    home = Path(settings.PMD_HOME)
    if _open_to_others(home):
        warnings.append(f"PMD_HOME ({home}) is open to other users of this machine: {close_to_others(home, settings)}")
    for secret in (home / "secret_key", home / "postgres" / "password"):
        if _open_to_others(secret):
            warnings.append(f"{secret} is readable by other users of this machine: chmod 600 {secret}")
    return warnings


def _sign_in_problems(settings) -> list[str]:
    """Team sign-in settings that let anyone in, or nobody."""
    problems = []
    if getattr(settings, "PMD_FORWARD_AUTH", False):
        widest = [str(n) for n in settings.PMD_FORWARD_AUTH_PROXIES if n.prefixlen == 0]
        if widest:
            problems.append(
                f"PMD_FORWARD_AUTH_PROXIES contains {widest[0]}: every client is trusted to name "
                "itself in Remote-User; list only the reverse proxy's addresses"
            )
    widest = [str(n) for n in getattr(settings, "PMD_TRUSTED_PROXIES", []) if n.prefixlen == 0]
    if widest:
        problems.append(
            f"PMD_TRUSTED_PROXIES contains {widest[0]}: every client may name its own address in "
            "X-Forwarded-For; list only the reverse proxy's addresses"
        )
    if not getattr(settings, "PMD_PASSWORD_LOGIN", True) and not (
        settings.PMD_OIDC_PROVIDERS or settings.PMD_FORWARD_AUTH or getattr(settings, "PMD_LDAP_URL", "")
    ):
        problems.append(
            "PMD_PASSWORD_LOGIN is off but no identity provider is configured (PMD_OIDC_PROVIDERS, "
            "PMD_FORWARD_AUTH, PMD_LDAP_URL): only the break-glass accounts can sign in"
        )
    return problems
