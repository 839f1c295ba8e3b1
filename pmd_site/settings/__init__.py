"""Django settings (DJANGO_SETTINGS_MODULE=pmd_site.settings), assembled from one module per concern.

Every value comes from the environment through the one table of settings (`table.py`); `cli.py`
is the same settings without the web's apps, for the CLI's read commands.
"""

# ruff: noqa: I001 - in the order the single module read them: which wrong value is reported first
from pmd_site.settings.core import *  # noqa: F403 - Django's own, where the data lives
from pmd_site.settings.http import *  # noqa: F403 - the web server, proxies, cookies
from pmd_site.settings.database import *  # noqa: F403 - PostgreSQL and its replicas
from pmd_site.settings.signin import *  # noqa: F403 - passwords, lockouts, identity providers
from pmd_site.settings.mail import *  # noqa: F403 - SMTP
from pmd_site.settings.workers import *  # noqa: F403 - celery, pmd up's processes, the watcher
from pmd_site.settings.indexing import *  # noqa: F403 - files, conversion, history
from pmd_site.settings.search import *  # noqa: F403 - ranking, the search log, digests
from pmd_site.settings.models import *  # noqa: F403 - the LLM backend and its models
from pmd_site.settings.logs import *  # noqa: F403 - logging
from pmd_site.settings.table import index_settings

# The settings an index keeps (indexing.services.index_config), handed down through Django's settings:
# the index's configuration is below pmd_site and may not import it.
PMD_INDEX_SETTINGS = index_settings()
