"""Django settings: every value comes from the environment through `pmd_site.env`."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlparse

from indexing.errors import ConfigError
from pmd_site import env
from pmd_site.runtime.postgres_server import PG_PORT, PG_USER, database_password, socket_dir_for
from pmd_site.runtime.server_files import private_dir

BASE_DIR = Path(__file__).resolve().parent.parent.parent
PMD_HOME = env.pmd_home()
PMD_INDEX = env.index_name()

DEBUG = env.get_bool("PMD_DEBUG", False)
SECRET_KEY = env.get_str("PMD_SECRET_KEY", "")
if not SECRET_KEY:
    # A laptop install has no secret to configure: keep a generated one beside the data.
    _secret_file = PMD_HOME / "secret_key"
    try:
        SECRET_KEY = _secret_file.read_text().strip()
    except OSError:
        import secrets

        SECRET_KEY = secrets.token_urlsafe(50)
        try:
            private_dir(PMD_HOME, create_marker=True)
            _fd = os.open(_secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(_fd, "w") as _handle:
                _handle.write(SECRET_KEY)
        except OSError:
            pass

ALLOWED_HOSTS = env.get_list("PMD_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.get_list("PMD_CSRF_TRUSTED_ORIGINS", [])
# The reverse proxies whose X-Forwarded-For / X-Forwarded-Proto count (pmd_site.security), by the
# connection's own address; the forward-auth proxies count too. From any other address those
# headers are ignored.
PMD_TRUSTED_PROXIES = env.get_networks("PMD_TRUSTED_PROXIES")
# Set by pmd_site.security.TrustedProxyMiddleware from a trusted proxy's X-Forwarded-Proto only.
SECURE_PROXY_SSL_HEADER = ("PMD_FORWARDED_PROTO", "https")
PMD_BEHIND_HTTPS_PROXY = env.get_bool("PMD_BEHIND_HTTPS_PROXY")
if PMD_BEHIND_HTTPS_PROXY and not (PMD_TRUSTED_PROXIES or env.get_networks("PMD_FORWARD_AUTH_PROXIES")):
    raise ConfigError("PMD_BEHIND_HTTPS_PROXY=true needs PMD_TRUSTED_PROXIES: the proxy's addresses or networks "
                      "(its X-Forwarded-For and X-Forwarded-Proto count from those addresses only)")
# Secure by default when a TLS-terminating proxy is declared; overridable either way.
SESSION_COOKIE_SECURE = env.get_bool("PMD_SECURE_COOKIES", env.get_bool("PMD_BEHIND_HTTPS_PROXY"))
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# Host / Origin headers accepted at /mcp (DNS-rebinding protection); empty = from ALLOWED_HOSTS.
PMD_MCP_ALLOWED_HOSTS = env.get_list("PMD_MCP_ALLOWED_HOSTS", [])
PMD_MCP_ALLOWED_ORIGINS = env.get_list("PMD_MCP_ALLOWED_ORIGINS", [])
# Web server timeouts in seconds (pmd serve; see pmd_site.runtime.http_protocol): a request header must be
# complete this long after its first byte; an idle keep-alive connection is closed; a request
# body (or a response the client stopped reading) may stall this long.
PMD_HTTP_HEADER_TIMEOUT = env.get_float("PMD_HTTP_HEADER_TIMEOUT", 10.0)
PMD_HTTP_KEEPALIVE_TIMEOUT = env.get_float("PMD_HTTP_KEEPALIVE_TIMEOUT", 30.0)  # outlive the clients' idle pools
PMD_HTTP_IDLE_TIMEOUT = env.get_float("PMD_HTTP_IDLE_TIMEOUT", 30.0)
for _name in ("PMD_HTTP_HEADER_TIMEOUT", "PMD_HTTP_KEEPALIVE_TIMEOUT", "PMD_HTTP_IDLE_TIMEOUT"):
    if globals()[_name] <= 0:
        raise ConfigError(f"{_name}={globals()[_name]} must be more than 0 seconds")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "ninja",  # its templates and static files: /api/docs served by pmd, not a CDN
    "axes",
    "indexing",
    "search",  # no models of its own now: kept for its migrations' history
    "pmd_site",
]

MIDDLEWARE = [
    "pmd_site.security.TrustedProxyMiddleware",  # X-Forwarded-Proto from PMD_TRUSTED_PROXIES only
    "django.middleware.security.SecurityMiddleware",
    "pmd_site.security.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "pmd_site.runtime.database_health.DatabaseUnavailableMiddleware",  # 503 + Retry-After while PostgreSQL is away
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "pmd_site.web.forward_auth.ForwardAuthMiddleware",  # Remote-User from the trusted proxy (PMD_FORWARD_AUTH)
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "pmd_site.web.errors.WebErrorMiddleware",  # a service error in a web UI view: its page and status
    "axes.middleware.AxesMiddleware",  # last, as django-axes requires
]

ROOT_URLCONF = "pmd_site.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]
ASGI_APPLICATION = "pmd_site.asgi.application"
WSGI_APPLICATION = "pmd_site.wsgi.application"


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


DATABASE_URL = env.get_str("DATABASE_URL", "")
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
DB_POOL = env.get_bool("PMD_DB_POOL", False)
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "CONN_MAX_AGE": 0 if DB_POOL else env.get_int("PMD_DB_CONN_MAX_AGE", 60, minimum=0),
        "CONN_HEALTH_CHECKS": not DB_POOL,
        "TEST": {"NAME": f"test_{_db['NAME']}"},
        **_db,
    }
}
if DB_POOL:
    DATABASES["default"]["OPTIONS"] = {
        **DATABASES["default"]["OPTIONS"],
        "pool": {"min_size": 1, "max_size": env.get_int("PMD_DB_POOL_MAX", 20, minimum=1), "timeout": 30},
    }

# Read replicas (streaming replicas of DATABASE_URL's server): searches, gets and listings read
# from them, everything else from the primary (indexing/replicas.py says what and why).
DATABASE_REPLICAS = []
_REPLICA_CONNECT_TIMEOUT = env.get_int("PMD_DB_REPLICA_CONNECT_TIMEOUT", 2, minimum=1)
for _number, _url in enumerate(env.get_list("DATABASE_REPLICA_URLS", []), start=1):
    _alias = f"replica_{_number}"
    _replica = _database_from_url(_url, "DATABASE_REPLICA_URLS")
    _replica["OPTIONS"].setdefault("connect_timeout", str(_REPLICA_CONNECT_TIMEOUT))
    _options = {**DATABASES["default"].get("OPTIONS", {}), **_replica["OPTIONS"]}
    if "pool" in _options:
        from psycopg_pool import ConnectionPool

        # A replica that went away must not hold a read for the pool's 30 s, nor hand out its
        # connections from before a restart: wait briefly, check each one handed out.
        _options["pool"] = {**_options["pool"], "timeout": _REPLICA_CONNECT_TIMEOUT,
                            "check": ConnectionPool.check_connection}
    DATABASES[_alias] = {**DATABASES["default"], **_replica, "OPTIONS": _options, "TEST": {"MIRROR": "default"}}
    DATABASE_REPLICAS.append(_alias)
DATABASE_ROUTERS = ["indexing.replicas.ReplicaRouter"]
# Seconds a process reads from the primary after it changed notes (its own writes, on every replica).
PMD_DB_REPLICA_PIN_SECONDS = max(0.0, env.get_float("PMD_DB_REPLICA_PIN_SECONDS", 5.0))
# Seconds a replica that did not answer is left alone before one read tries it again.
PMD_DB_REPLICA_RETRY_SECONDS = max(0.0, env.get_float("PMD_DB_REPLICA_RETRY_SECONDS", 30.0))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# --- Login throttling (django-axes), bearer-token throttling, CSP, email ----------------
AUTHENTICATION_BACKENDS = [
    "pmd_site.security.LoginThrottleBackend",  # refuses locked-out logins before checking passwords
    "pmd_site.signin.backends.PasswordBackend",  # the password form (PMD_PASSWORD_LOGIN)
    "pmd_site.signin.backends.ProviderBackend",  # sessions begun by a provider or the proxy
]
PMD_LOGIN_FAILURE_LIMIT = env.get_int("PMD_LOGIN_FAILURE_LIMIT", 10, minimum=0)
PMD_LOGIN_COOLOFF_MINUTES = env.get_int("PMD_LOGIN_COOLOFF_MINUTES", 15, minimum=1)
AXES_ENABLED = PMD_LOGIN_FAILURE_LIMIT > 0
AXES_FAILURE_LIMIT = max(PMD_LOGIN_FAILURE_LIMIT, 1)
AXES_COOLOFF_TIME = PMD_LOGIN_COOLOFF_MINUTES / 60  # hours
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # either one reaching the limit locks
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False  # a lockout ends on time, however hard it is hammered
AXES_CLIENT_IP_CALLABLE = "pmd_site.security.client_address"
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False  # its "AXES: BEGIN" line, once per process start (four times per `pmd up`), told nobody anything
AXES_DISABLE_ACCESS_LOG = True  # no ever-growing table of successful logins (last_login is kept anyway)
PMD_TOKEN_FAILURE_LIMIT = env.get_int("PMD_TOKEN_FAILURE_LIMIT", 20, minimum=0)
PMD_TOKEN_COOLOFF_MINUTES = env.get_int("PMD_TOKEN_COOLOFF_MINUTES", 15, minimum=1)
# --- Team sign-in: OpenID Connect providers, forward auth, LDAP, the groups they bring -------
# First sign-in through a provider creates the account (false: only accounts an admin made).
PMD_SIGNIN_CREATE_USERS = env.get_bool("PMD_SIGNIN_CREATE_USERS", True)
# The claim (OpenID) holding the person's groups; the proxy's header is PMD_FORWARD_AUTH_GROUPS_HEADER.
PMD_GROUPS_CLAIM = env.get_str("PMD_GROUPS_CLAIM", "groups")
# Only these provider groups become pmd groups (a prefix, an allow-list; neither: all of them).
PMD_GROUPS_PREFIX = env.get_str("PMD_GROUPS_PREFIX", "")
PMD_GROUPS_ALLOWED = env.get_list("PMD_GROUPS_ALLOWED")
# Members of these provider groups are staff / superusers (set: recomputed at every sign-in).
PMD_STAFF_GROUPS = env.get_list("PMD_STAFF_GROUPS")
PMD_SUPERUSER_GROUPS = env.get_list("PMD_SUPERUSER_GROUPS")
# false: the password form only for the break-glass accounts named in PMD_PASSWORD_LOGIN_USERS.
PMD_PASSWORD_LOGIN = env.get_bool("PMD_PASSWORD_LOGIN", True)
PMD_PASSWORD_LOGIN_USERS = env.get_list("PMD_PASSWORD_LOGIN_USERS", ["admin"])
PMD_FORWARD_AUTH = env.get_bool("PMD_FORWARD_AUTH", False)
PMD_FORWARD_AUTH_PROXIES = env.get_networks("PMD_FORWARD_AUTH_PROXIES")
if PMD_FORWARD_AUTH and not PMD_FORWARD_AUTH_PROXIES:
    raise ConfigError("PMD_FORWARD_AUTH=true needs PMD_FORWARD_AUTH_PROXIES: the proxy's addresses or networks")
PMD_FORWARD_AUTH_USER_HEADER = env.get_str("PMD_FORWARD_AUTH_USER_HEADER", "Remote-User")
PMD_FORWARD_AUTH_GROUPS_HEADER = env.get_str("PMD_FORWARD_AUTH_GROUPS_HEADER", "Remote-Groups")
PMD_FORWARD_AUTH_EMAIL_HEADER = env.get_str("PMD_FORWARD_AUTH_EMAIL_HEADER", "Remote-Email")
PMD_FORWARD_AUTH_LOGOUT_URL = env.get_str("PMD_FORWARD_AUTH_LOGOUT_URL", "")
# OpenID Connect: PMD_OIDC_PROVIDERS=authentik,keycloak, then PMD_OIDC_<ID>_ISSUER, _CLIENT_ID,
# _CLIENT_SECRET, _SCOPES, _NAME (the button's label) and _USERNAME_CLAIM for each.
PMD_OIDC_PROVIDERS = env.get_oidc_providers()
PMD_OIDC_TIMEOUT = env.get_float("PMD_OIDC_TIMEOUT", 10.0)
# LDAP (the ldap extra): django-auth-ldap binds as PMD_LDAP_BIND_DN and searches for the person.
PMD_LDAP_URL = env.get_str("PMD_LDAP_URL", "")
if PMD_LDAP_URL:
    try:
        import ldap
        from django_auth_ldap.config import GroupOfNamesType, GroupOfUniqueNamesType, LDAPSearch, PosixGroupType
    except ImportError:
        raise ConfigError("PMD_LDAP_URL needs the ldap extra: pip install 'pmd[ldap]'") from None
    AUTH_LDAP_SERVER_URI = PMD_LDAP_URL
    AUTH_LDAP_BIND_DN = env.get_str("PMD_LDAP_BIND_DN", "")
    AUTH_LDAP_BIND_PASSWORD = env.get_str("PMD_LDAP_BIND_PASSWORD", "")
    AUTH_LDAP_START_TLS = env.get_bool("PMD_LDAP_START_TLS", False)
    AUTH_LDAP_USER_SEARCH = LDAPSearch(env.get_str("PMD_LDAP_USER_SEARCH", ""), ldap.SCOPE_SUBTREE,
                                       env.get_str("PMD_LDAP_USER_FILTER", "(uid=%(user)s)"))
    if env.get_str("PMD_LDAP_GROUP_SEARCH"):
        _group_types = {"groupOfNames": GroupOfNamesType, "groupOfUniqueNames": GroupOfUniqueNamesType,
                        "posixGroup": PosixGroupType}
        _group_type = env.get_str("PMD_LDAP_GROUP_TYPE", "groupOfNames")
        if _group_type not in _group_types:
            raise ConfigError(f"PMD_LDAP_GROUP_TYPE={_group_type!r}: use {', '.join(_group_types)}")
        AUTH_LDAP_GROUP_SEARCH = LDAPSearch(env.get_str("PMD_LDAP_GROUP_SEARCH"), ldap.SCOPE_SUBTREE,
                                            f"(objectClass={_group_type})")
        AUTH_LDAP_GROUP_TYPE = _group_types[_group_type](name_attr="cn")
    AUTHENTICATION_BACKENDS.insert(1, "pmd_site.signin.ldap.LdapBackend")  # after the lockout check
# Documents may show images from any https: address (off: only pmd's own and data: images).
PMD_ALLOW_REMOTE_IMAGES = env.get_bool("PMD_ALLOW_REMOTE_IMAGES", False)
# Password reset by email is offered only when an SMTP server is configured.
EMAIL_HOST = env.get_str("PMD_EMAIL_HOST", "")
EMAIL_PORT = env.get_int("PMD_EMAIL_PORT", 587, minimum=1)
EMAIL_HOST_USER = env.get_str("PMD_EMAIL_USER", "")
EMAIL_HOST_PASSWORD = env.get_str("PMD_EMAIL_PASSWORD", "")
EMAIL_USE_TLS = env.get_bool("PMD_EMAIL_STARTTLS", True)
EMAIL_USE_SSL = env.get_bool("PMD_EMAIL_SSL", False)
if EMAIL_USE_SSL:
    EMAIL_USE_TLS = False  # Django refuses both; implicit TLS wins when asked for
EMAIL_TIMEOUT = 20
DEFAULT_FROM_EMAIL = env.get_str("PMD_EMAIL_FROM", "pmd@localhost")

LANGUAGE_CODE = "en-us"
TIME_ZONE = env.get_str("PMD_TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = env.get_path("PMD_STATIC_ROOT", PMD_HOME / "static")
STATICFILES_DIRS = [BASE_DIR / "pmd_site" / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

# --- Broker / celery -------------------------------------------------------------
# Empty means "the embedded Redis under PMD_HOME" (started by pmd itself).
CELERY_BROKER_URL = env.get_str("CELERY_BROKER_URL", "")
CELERY_RESULT_BACKEND = env.get_str("CELERY_RESULT_BACKEND", "")
CELERY_TASK_ALWAYS_EAGER = env.get_bool("PMD_TASKS_EAGER", False)
# What `pmd worker` takes when --queues is not given: all, index (indexing, converting and the
# rest) or embed; one image on several hosts, each host its role (e.g. embed next to the GPU).
PMD_WORKER_QUEUES = env.get_str("PMD_WORKER_QUEUES", "all").strip().lower() or "all"
if PMD_WORKER_QUEUES not in ("all", "index", "embed"):
    raise ConfigError(f"PMD_WORKER_QUEUES={PMD_WORKER_QUEUES!r} must be all, index or embed")
PMD_RECONCILE_INTERVAL = env.get_int("PMD_RECONCILE_INTERVAL", 900, minimum=0)
PMD_PULL_ON_RECONCILE = env.get_bool("PMD_PULL_ON_RECONCILE", False)
# A running job whose process sent no heartbeat for this long (another machine's worker) is
# recovered as "worker stopped"; on the same machine a dead process is noticed at once.
PMD_JOB_STALE_SECONDS = env.get_int("PMD_JOB_STALE_SECONDS", 300, minimum=30)

# --- Folder watcher (pmd up / pmd watch) ------------------------------------------------
PMD_WATCH = env.get_bool("PMD_WATCH", True)
PMD_WATCH_POLLING = env.get_bool("PMD_WATCH_POLLING", False)
PMD_WATCH_DEBOUNCE_MS = env.get_int("PMD_WATCH_DEBOUNCE_MS", 300, minimum=10)

# --- Indexing --------------------------------------------------------------------
PMD_MAX_FILE_BYTES = env.get_int("PMD_MAX_FILE_BYTES", 5 * 1024 * 1024, minimum=1)
PMD_DEFAULT_MASK = env.get_str("PMD_DEFAULT_MASK", "**/*.md")
# Files that are not markdown (PDF, DOCX, PPTX, XLSX, HTML, EPUB: indexing/convert) are read in a
# child process with these limits; a file over one is a problem with the reason, the rest indexes.
PMD_CONVERT_MAX_FILE_BYTES = env.get_int("PMD_CONVERT_MAX_FILE_BYTES", 100 * 1024 * 1024, minimum=1)
PMD_CONVERT_SECONDS = env.get_int("PMD_CONVERT_SECONDS", 120, minimum=1)
PMD_CONVERT_MEMORY_MB = env.get_int("PMD_CONVERT_MEMORY_MB", 1024, minimum=0)
PMD_CONVERT_MAX_PAGES = env.get_int("PMD_CONVERT_MAX_PAGES", 2000, minimum=1)
PMD_CONVERT_MAX_UNZIPPED_BYTES = env.get_int("PMD_CONVERT_MAX_UNZIPPED_BYTES", 200 * 1024 * 1024, minimum=1)
PMD_CONVERT_MAX_CELLS = env.get_int("PMD_CONVERT_MAX_CELLS", 200_000, minimum=1)
# Scanned PDF pages (no text layer): auto reads them with tesseract when it is installed; off never.
PMD_OCR = env.get_str("PMD_OCR", "auto")
PMD_OCR_LANGUAGES = env.get_str("PMD_OCR_LANGUAGES", "eng")
PMD_TEXT_SEARCH_CONFIG = env.get_str("PMD_TEXT_SEARCH_CONFIG", "english")
# Language of new collections: auto (detected from a sample of the notes), or a code such as de.
PMD_LANGUAGE = env.get_str("PMD_LANGUAGE", "auto")
# Folders under which staff may add collections from the web UI, API and admin (the CLI is not limited).
PMD_COLLECTION_ROOTS = [Path(p).expanduser() for p in env.get_list("PMD_COLLECTION_ROOTS")]
# multi-get answers (CLI, API, MCP) hold at most this much text: documents plus what was left out.
PMD_MULTI_GET_MAX_TOTAL_BYTES = env.get_int("PMD_MULTI_GET_MAX_TOTAL_BYTES", 1024 * 1024, minimum=1)
# History search (issue 18): the commits of collections inside a git work tree.
PMD_HISTORY = env.get_bool("PMD_HISTORY", True)
PMD_HISTORY_DIFF_LINES = env.get_int("PMD_HISTORY_DIFF_LINES", 200, minimum=0)
PMD_HISTORY_MAX_COMMITS = env.get_int("PMD_HISTORY_MAX_COMMITS", 20000, minimum=1)
# `pmd update --pull`: seconds a `git pull` may take before it and all it started are killed.
PMD_GIT_PULL_TIMEOUT = max(1.0, env.get_float("PMD_GIT_PULL_TIMEOUT", 120.0))

# --- Keyword search (BM25) -----------------------------------------------------
PMD_BM25_K1 = env.get_float("PMD_BM25_K1", 0.9)
PMD_BM25_B = env.get_float("PMD_BM25_B", 0.4)
PMD_BM25_TITLE_WEIGHT = env.get_float("PMD_BM25_TITLE_WEIGHT", 2.0)  # title/headings term frequency counts this much
# Typos (issue 31): a query word no searched note holds is corrected from the collections' own words.
PMD_TYPO_CORRECTION = env.get_bool("PMD_TYPO_CORRECTION", True)
# The search log (issue 31): staff see the team's top, zero-result, weak and slow queries; kept this many days.
PMD_SEARCH_LOG = env.get_bool("PMD_SEARCH_LOG", True)
# Time words in a plain query ("notes last week", "yesterday", "recent") become a removable date filter.
PMD_TIME_WORDS = env.get_bool("PMD_TIME_WORDS", True)
PMD_SEARCH_LOG_DAYS = env.get_int("PMD_SEARCH_LOG_DAYS", 90, minimum=1)
# Saved searches with a webhook or an email digest are run this often (seconds; 0: never) by celery beat.
PMD_DIGEST_INTERVAL = env.get_int("PMD_DIGEST_INTERVAL", 86400, minimum=0)
# A digest webhook may name a private or loopback address (off: only public addresses, so a member
# cannot make the server call its neighbours).
PMD_DIGEST_PRIVATE_WEBHOOKS = env.get_bool("PMD_DIGEST_PRIVATE_WEBHOOKS", False)

# --- LLM backend -------------------------------------------------------------------
OLLAMA_URL = env.get_str("OLLAMA_URL", "http://127.0.0.1:11434")
PMD_LLM_BACKEND = env.get_str("PMD_LLM_BACKEND", "ollama")
PMD_OPENAI_BASE_URL = env.get_str("PMD_OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
PMD_OPENAI_API_KEY = env.get_str("PMD_OPENAI_API_KEY", "")
# Each backend's default models (in-process models, indexing/llm/local.py, have their own); also
# used when the index's configuration chooses the backend (indexing/services/index_config.py).
PMD_MODEL_DEFAULTS = {
    "local": {"PMD_EMBED_MODEL": "intfloat/multilingual-e5-small", "PMD_GENERATE_MODEL": "",
              "PMD_RERANK_MODEL": "cross-encoder/ms-marco-MiniLM-L6-v2", "PMD_ANSWER_MODEL": ""},
    "ollama": {"PMD_EMBED_MODEL": "embeddinggemma", "PMD_GENERATE_MODEL": "qwen3:0.6b",
               "PMD_RERANK_MODEL": "dengcao/Qwen3-Reranker-0.6B:Q8_0", "PMD_ANSWER_MODEL": "qwen3:1.7b"},
}
_DEFAULTS = PMD_MODEL_DEFAULTS["local" if PMD_LLM_BACKEND == "local" else "ollama"]
PMD_EMBED_MODEL = env.get_str("PMD_EMBED_MODEL", _DEFAULTS["PMD_EMBED_MODEL"])
PMD_CHUNK_TOKENS = env.get_int("PMD_CHUNK_TOKENS", 900, minimum=32)
# Unset: the local backend sizes chunks to its model's window (multilingual-e5-small: 512 word pieces).
PMD_CHUNK_TOKENS_FROM_MODEL = env.get_str("PMD_CHUNK_TOKENS") == ""
PMD_CHUNK_OVERLAP = env.get_float("PMD_CHUNK_OVERLAP", 0.15)
PMD_CHUNK_WINDOW = env.get_int("PMD_CHUNK_WINDOW", 200, minimum=1)
PMD_EMBED_QUERY_PROMPT = env.get_str("PMD_EMBED_QUERY_PROMPT", "")
PMD_EMBED_DOC_PROMPT = env.get_str("PMD_EMBED_DOC_PROMPT", "")
PMD_EMBED_BATCH = env.get_int("PMD_EMBED_BATCH", 32, minimum=1)
PMD_GENERATE_MODEL = env.get_str("PMD_GENERATE_MODEL", _DEFAULTS["PMD_GENERATE_MODEL"])
PMD_RERANK_MODEL = env.get_str("PMD_RERANK_MODEL", _DEFAULTS["PMD_RERANK_MODEL"])
# A model the server does not have (404) is not asked for again for this long (seconds): its stage is
# skipped quietly meanwhile (search.pipeline.absent); 0 asks every query.
PMD_MISSING_MODEL_RECHECK = env.get_float("PMD_MISSING_MODEL_RECHECK", 600.0)
PMD_RERANK_API = env.get_str("PMD_RERANK_API", "auto").lower()
if PMD_RERANK_API not in {"auto", "chat", "rerank", "tei"}:
    raise ConfigError(f"PMD_RERANK_API={PMD_RERANK_API!r}: use auto, chat, rerank or tei")
PMD_RERANK_URL = env.get_str("PMD_RERANK_URL", "")
PMD_RERANK_BATCH = env.get_int("PMD_RERANK_BATCH", 32, minimum=1)
PMD_LOCAL_THREADS = env.get_int("PMD_LOCAL_THREADS", 0, minimum=0)
# Texts per inference of the local models (0: 8). Fewer keep ONNX Runtime's buffers smaller.
PMD_LOCAL_BATCH = env.get_int("PMD_LOCAL_BATCH", 0, minimum=0)
# Set by `pmd up` for its children: the Unix socket on which the process that embeds serves the
# local models to the others (indexing/llm/shared.py), so only it loads them.
PMD_MODEL_SOCKET = env.get_str("PMD_MODEL_SOCKET", "")
# `pmd up`'s processes: "default" (web, an index worker, an embedder, beat, watcher) or "small"
# (web and one worker running both queues, the scheduler and the watcher: for small boxes).
PMD_PROFILE = env.get_str("PMD_PROFILE", "default").strip().lower()
if PMD_PROFILE not in {"default", "small"}:
    raise ConfigError(f"PMD_PROFILE={PMD_PROFILE!r}: use default or small")
# int8: the local embedding model runs as an int8 copy made once (indexing/llm/quantize.py), faster
# and smaller but 0.014 nDCG@10 below on half of SciFact's and Cranfield's queries; fp32: as exported.
# The small profile's default is int8 (memory first), the others' fp32 (quality first).
PMD_LOCAL_PRECISION = env.get_str("PMD_LOCAL_PRECISION", "int8" if PMD_PROFILE == "small" else "fp32").lower()
if PMD_LOCAL_PRECISION not in {"int8", "fp32"}:
    raise ConfigError(f"PMD_LOCAL_PRECISION={PMD_LOCAL_PRECISION!r}: use int8 or fp32")
# `pmd query` deadlines (seconds): the whole query, and its expansion / re-ranking stages.
PMD_QUERY_TIMEOUT = env.get_float("PMD_QUERY_TIMEOUT", 30.0)
PMD_EXPAND_TIMEOUT = env.get_float("PMD_EXPAND_TIMEOUT", 10.0)
PMD_RERANK_TIMEOUT = env.get_float("PMD_RERANK_TIMEOUT", 15.0)
for _name in ("PMD_QUERY_TIMEOUT", "PMD_EXPAND_TIMEOUT", "PMD_RERANK_TIMEOUT"):
    if globals()[_name] <= 0:
        raise ConfigError(f"{_name}={globals()[_name]} must be more than 0 seconds")
PMD_RERANK_CONCURRENCY = env.get_int("PMD_RERANK_CONCURRENCY", 4, minimum=1)
PMD_LLM_TIMEOUT = env.get_float("PMD_LLM_TIMEOUT", 120.0)
PMD_LLM_RETRIES = env.get_int("PMD_LLM_RETRIES", 3, minimum=0)
PMD_LLM_RETRY_BACKOFF = env.get_float("PMD_LLM_RETRY_BACKOFF", 0.5)
PMD_OLLAMA_KEEP_ALIVE = env.get_str("PMD_OLLAMA_KEEP_ALIVE", "")
PMD_HNSW_EF_SEARCH = env.get_int("PMD_HNSW_EF_SEARCH", 200, minimum=1)
# What the HNSW index holds: full-precision `vector` or half-precision `halfvec` (half the index,
# the memory that must stay cached; the table keeps full precision). README, "Scale".
PMD_VECTOR_STORAGE = env.get_str("PMD_VECTOR_STORAGE", "vector").strip().lower()
if PMD_VECTOR_STORAGE not in ("vector", "halfvec"):
    raise ConfigError(f"PMD_VECTOR_STORAGE={PMD_VECTOR_STORAGE!r}: vector or halfvec")
# `pmd query` ranking signals from the notes' structure (search.pipeline.signals); 0 = off.
PMD_LINK_BOOST = max(0.0, env.get_float("PMD_LINK_BOOST", 0.0))
PMD_RECENCY_BOOST = max(0.0, env.get_float("PMD_RECENCY_BOOST", 0.0))

# Ask (search.pipeline.answer): the chat model answering from the notes ("" or none: Ask off,
# search as before), the passages' token budget, the deadline, the score under which the notes
# do not cover a question, and questions per user per minute (0: no limit).
PMD_ANSWER_MODEL = env.get_str("PMD_ANSWER_MODEL", _DEFAULTS["PMD_ANSWER_MODEL"])
PMD_ANSWER_BUDGET = env.get_int("PMD_ANSWER_BUDGET", 4000, minimum=200)
PMD_ANSWER_PASSAGES = env.get_int("PMD_ANSWER_PASSAGES", 12, minimum=1)
PMD_ANSWER_TIMEOUT = env.get_float("PMD_ANSWER_TIMEOUT", 120.0)
if PMD_ANSWER_TIMEOUT <= 0:
    raise ConfigError(f"PMD_ANSWER_TIMEOUT={PMD_ANSWER_TIMEOUT} must be more than 0 seconds")
PMD_ANSWER_MIN_SCORE = env.get_float("PMD_ANSWER_MIN_SCORE", 0.3)
PMD_ANSWER_RATE = env.get_int("PMD_ANSWER_RATE", 10, minimum=0)

# plain (human-readable) or json (one object per line, for log collectors).
PMD_LOG_FORMAT = env.get_str("PMD_LOG_FORMAT", "plain")
if PMD_LOG_FORMAT not in {"plain", "json"}:
    raise ConfigError(f"PMD_LOG_FORMAT={PMD_LOG_FORMAT!r}: use plain or json")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "pmd_site.logformat.JsonFormatter"},
    },
    # The process's own stderr, whatever sys.stderr is when logging is set up: in a server answering
    # pmd clients, sys.stderr follows the client being answered, and the server's log is not theirs.
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": PMD_LOG_FORMAT,
                             "stream": "ext://sys.__stderr__"}},
    "root": {"handlers": ["console"], "level": env.get_str("PMD_LOG_LEVEL", "WARNING")},
    # One line per HTTP request (embedding batches, health checks every few seconds) drowns what
    # happened: the clients log their requests only at PMD_HTTP_LOG_LEVEL (WARNING: failures only).
    "loggers": {name: {"level": env.get_str("PMD_HTTP_LOG_LEVEL", "WARNING")} for name in ("httpx", "httpcore")},
}
