"""The one place that reads the environment.

Every setting pmd understands is parsed here with a typed helper, as its entry in the table of
settings (`pmd_site/settings/table.py`) says; the rest of the code base takes values from
`django.conf.settings` or from function arguments. It stays outside the settings package: the CLI
reads the environment with it before (or without) loading the settings (client mode, `pmd mcp`).
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from indexing.errors import ConfigError  # imports nothing of pmd's: safe before settings


def get_str(name: str, default: str = "") -> str:
    value = os.environ.get(name)
    return default if value is None or value == "" else value


def get_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"{name}={raw!r} is not a boolean (use true/false)")


def get_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a whole number") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name}={value} must be at least {minimum}")
    return value


def get_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number") from None


def get_list(name: str, default: list[str] | None = None, *, sep: str = ",") -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return list(default or [])
    return [item.strip() for item in raw.split(sep) if item.strip()]


def get_networks(name: str) -> list:
    """Addresses or networks ("10.0.0.5, 172.18.0.0/16, ::1"), as ip_network objects."""
    networks = []
    for item in get_list(name):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ConfigError(f"{name}: {item!r} is not an address or a network") from None
    return networks


def get_oidc_providers() -> list[dict]:
    """The OpenID providers named in PMD_OIDC_PROVIDERS, each from its PMD_OIDC_<ID>_* variables."""
    providers = []
    for ident in get_list("PMD_OIDC_PROVIDERS"):
        if not ident.replace("_", "").replace("-", "").isalnum():
            raise ConfigError(f"PMD_OIDC_PROVIDERS: {ident!r} must be letters, digits, - or _")
        prefix = f"PMD_OIDC_{ident.upper().replace('-', '_')}_"
        provider = {
            "id": ident.lower(),
            "name": get_str(prefix + "NAME", ident),
            "issuer": get_str(prefix + "ISSUER"),
            "client_id": get_str(prefix + "CLIENT_ID"),
            "client_secret": get_str(prefix + "CLIENT_SECRET"),
            "scopes": get_str(prefix + "SCOPES", "openid email profile groups"),
            "username_claim": get_str(prefix + "USERNAME_CLAIM", "preferred_username"),
        }
        for field in ("issuer", "client_id"):
            if not provider[field]:
                raise ConfigError(f"{prefix}{field.upper()} is not set (OpenID provider {ident!r})")
        if "openid" not in provider["scopes"].split():
            provider["scopes"] = "openid " + provider["scopes"]
        providers.append(provider)
    return providers


def get_path(name: str, default: Path) -> Path:
    raw = os.environ.get(name)
    return Path(raw).expanduser() if raw else default


ROOT_DEFAULT_HOME = Path("/var/lib/pmd")


def pmd_home() -> Path:
    """Where embedded data lives: `$PMD_HOME`, else `$XDG_DATA_HOME/pmd` (`/var/lib/pmd` for root).

    Root's own home is closed to the unprivileged user the embedded PostgreSQL runs as,
    and pmd never opens folders it did not create, so root gets a system data folder.
    """
    if os.environ.get("XDG_DATA_HOME") or os.geteuid() != 0:
        default = get_path("XDG_DATA_HOME", Path.home() / ".local" / "share") / "pmd"
    else:
        default = ROOT_DEFAULT_HOME
    return get_path("PMD_HOME", default).resolve()


def index_name() -> str:
    """The named index (`--index NAME`): each one is a separate database."""
    name = get_str("PMD_INDEX", "default")
    if not name.replace("_", "").replace("-", "").isalnum():
        raise ConfigError(f"PMD_INDEX={name!r}: use letters, digits, '-' and '_' only")
    return name
