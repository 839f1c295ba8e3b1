"""Logging: the level, the format (plain or json), and the quieter HTTP clients."""

from __future__ import annotations

from pmd_site.settings.table import read

# plain (human-readable) or json (one object per line, for log collectors).
PMD_LOG_FORMAT = read("PMD_LOG_FORMAT")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "pmd_site.logformat.JsonFormatter"},
    },
    # The process's own stderr, whatever sys.stderr is when logging is set up: in a server answering
    # pmd clients, sys.stderr follows the client being answered, and the server's log is not theirs.
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": PMD_LOG_FORMAT, "stream": "ext://sys.__stderr__"}
    },
    "root": {"handlers": ["console"], "level": read("PMD_LOG_LEVEL")},
    # One line per HTTP request (embedding batches, health checks every few seconds) drowns what
    # happened: the clients log their requests only at PMD_HTTP_LOG_LEVEL (WARNING: failures only).
    "loggers": {name: {"level": read("PMD_HTTP_LOG_LEVEL")} for name in ("httpx", "httpcore")},
}
