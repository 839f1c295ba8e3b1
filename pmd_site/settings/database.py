"""The database: the embedded PostgreSQL or DATABASE_URL's server, connections, read replicas."""

from __future__ import annotations

from urllib.parse import parse_qsl, unquote, urlparse

from indexing.errors import ConfigError
from pmd_site.runtime.postgres_server import PG_PORT, PG_USER, database_password, socket_dir_for
from pmd_site.settings.core import PMD_HOME, PMD_INDEX
from pmd_site.settings.table import read


def _database_from_url(url: str, variable: str = "DATABASE_URL") -> dict:
    # compose writes POSTGRES_PASSWORD into DATABASE_URL as it is, so the password may hold a
    # '/' (`openssl rand -base64`), '#' or '?': the user part ends at the last '@'.
    scheme, _, rest = url.partition("://")
    userinfo, _, rest = rest.rpartition("@")
    parsed = urlparse(f"{scheme}://{rest}")
    if parsed.scheme not in {"postgres", "postgresql", "pgsql"}:
        raise ConfigError(f"{variable} must be a postgres:// URL, got scheme {parsed.scheme!r}")
    try:
        port = parsed.port
    except ValueError as exc:
        raise ConfigError(f"{variable}: {exc}") from None
    options = dict(parse_qsl(parsed.query))
    name = unquote(parsed.path.lstrip("/")) or "pmd"
    host = options.pop("host", parsed.hostname or "")
    user, _, password = userinfo.partition(":")
    return {
        "NAME": name if PMD_INDEX == "default" else f"{name}_{PMD_INDEX}",
        "USER": unquote(user),
        "PASSWORD": unquote(password),
        "HOST": host,
        "PORT": str(port or ""),
        "OPTIONS": options,
    }


DATABASE_URL = read("DATABASE_URL")
EMBEDDED_DATABASE = not DATABASE_URL
if EMBEDDED_DATABASE:
    _db = {
        "NAME": "pmd" if PMD_INDEX == "default" else f"pmd_{PMD_INDEX}",
        "USER": PG_USER,
        "PASSWORD": database_password(PMD_HOME),
        "HOST": str(socket_dir_for(PMD_HOME)),
        "PORT": str(PG_PORT),
        "OPTIONS": {},
    }
else:
    _db = _database_from_url(DATABASE_URL)

# Under ASGI every request runs in a fresh thread, so persistent per-thread connections would
# mean a new PostgreSQL backend per request: the web server uses a connection pool instead
# (pmd_site.asgi turns it on). Short-lived CLI processes and workers keep plain connections.
DB_POOL = read("PMD_DB_POOL")
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "CONN_MAX_AGE": 0 if DB_POOL else read("PMD_DB_CONN_MAX_AGE"),
        "CONN_HEALTH_CHECKS": not DB_POOL,
        "TEST": {"NAME": f"test_{_db['NAME']}"},
        **_db,
    }
}
if DB_POOL:
    DATABASES["default"]["OPTIONS"] = {
        **DATABASES["default"]["OPTIONS"],
        "pool": {"min_size": 1, "max_size": read("PMD_DB_POOL_MAX"), "timeout": 30},
    }

# Read replicas (streaming replicas of DATABASE_URL's server): searches, gets and listings read
# from them, everything else from the primary (indexing/replicas.py says what and why).
DATABASE_REPLICAS = []
_REPLICA_CONNECT_TIMEOUT = read("PMD_DB_REPLICA_CONNECT_TIMEOUT")
for _number, _url in enumerate(read("DATABASE_REPLICA_URLS"), start=1):
    _alias = f"replica_{_number}"
    _replica = _database_from_url(_url, "DATABASE_REPLICA_URLS")
    _replica["OPTIONS"].setdefault("connect_timeout", str(_REPLICA_CONNECT_TIMEOUT))
    _options = {**DATABASES["default"].get("OPTIONS", {}), **_replica["OPTIONS"]}
    if "pool" in _options:
        from psycopg_pool import ConnectionPool  # only with a pool: the CLI never loads it

        # A replica that went away must not hold a read for the pool's 30 s, nor hand out its
        # connections from before a restart: wait briefly, check each one handed out.
        _options["pool"] = {
            **_options["pool"],
            "timeout": _REPLICA_CONNECT_TIMEOUT,
            "check": ConnectionPool.check_connection,
        }
    DATABASES[_alias] = {**DATABASES["default"], **_replica, "OPTIONS": _options, "TEST": {"MIRROR": "default"}}
    DATABASE_REPLICAS.append(_alias)
DATABASE_ROUTERS = ["indexing.replicas.ReplicaRouter"]
# Seconds a process reads from the primary after it changed notes (its own writes, on every replica).
PMD_DB_REPLICA_PIN_SECONDS = max(0.0, read("PMD_DB_REPLICA_PIN_SECONDS"))
# Seconds a replica that did not answer is left alone before one read tries it again.
PMD_DB_REPLICA_RETRY_SECONDS = max(0.0, read("PMD_DB_REPLICA_RETRY_SECONDS"))
