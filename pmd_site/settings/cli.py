"""Settings for the CLI's read commands run in-process (`pmd search`, `get`, `ls`, …): pmd's settings
without the apps only the web server uses.

Loading the admin (and, through it, Django's forms and URL machinery), sessions, messages,
django-ninja (with pydantic) and django-axes costs a `pmd search` more than the search itself,
and a read command touches none of their models. Everything else is `pmd_site.settings` as is;
`pmd_site.cli.main` picks this module for the commands client mode may answer (READ_COMMANDS
and READ_ACTIONS in pmd_site/cli/client.py). A migration run from here applies the migrations of
the apps below; the others' wait for the next full command (`pmd up`, `pmd serve`, `pmd migrate`,
any write).
"""

from pmd_site.settings import *  # noqa: F403 - the same settings…
from pmd_site.settings import DATABASES as _ALL_DATABASES
from pmd_site.settings import INSTALLED_APPS as _ALL_APPS

WEB_ONLY_APPS = frozenset(
    {
        "django.contrib.admin",
        "django.contrib.sessions",
        "django.contrib.messages",
        "django.contrib.staticfiles",
        "django_htmx",
        "ninja",
        "axes",
    }
)

INSTALLED_APPS = [app for app in _ALL_APPS if app not in WEB_ONLY_APPS]  # …minus the web's apps

# One command, one connection: the web server's pool (PMD_DB_POOL, which pmd_site.asgi turns on)
# would add a thread and psycopg_pool here, and wait its whole timeout for a server that is down.
# The same for each read replica (DATABASE_REPLICA_URLS): a command on any host reads from them too.
DATABASES = {
    alias: {
        **database,
        "CONN_MAX_AGE": 0,
        "CONN_HEALTH_CHECKS": False,
        "OPTIONS": {k: v for k, v in database["OPTIONS"].items() if k != "pool"},
    }
    for alias, database in _ALL_DATABASES.items()
}

# Django's logging set-up makes its admins' mail handler, which imports the exception reporter named
# here at once, and with it django.views.debug's template engine and tag libraries (a tenth of a
# `pmd search`'s imports). A command never renders a report (no ADMINS: the handler sends nothing),
# so the reporter is named by a stand-in that imports Django's when one is made.
DEFAULT_EXCEPTION_REPORTER = "pmd_site.settings.cli.ExceptionReporter"


class ExceptionReporter:
    """django.views.debug.ExceptionReporter, imported when a report is made."""

    def __new__(cls, *args, **kwargs):
        from django.views.debug import ExceptionReporter  # noqa: PLC0415 - start-up: only when a report is made

        return ExceptionReporter(*args, **kwargs)
