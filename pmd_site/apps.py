from django.apps import AppConfig
from django.db.backends.signals import connection_created


class PmdSiteConfig(AppConfig):
    """The faces and their wiring. As an app, Django finds its admin (pmd_site/admin)."""

    name = "pmd_site"
    verbose_name = "pmd"

    def ready(self) -> None:
        # The celery tasks register with indexing/services/background.py, which starts them; it
        # imports them (and celery) when work is first asked for, not in every read-only command.
        # A worker finds them through celery's autodiscovery (pmd_site/celery.py).
        from indexing.services import background  # noqa: PLC0415 - imports models: not while apps load

        background.task_loader(_import_tasks)

        # Every process uses the index's own configuration (backend, models, chunking), read
        # when it first reaches the database (indexing/services/index_config.py).
        connection_created.connect(_index_config, dispatch_uid="pmd-index-config")


def _index_config(sender, connection, **_) -> None:
    if connection.alias != "default":
        return
    from indexing.services.index_config import index_config_apply_once  # noqa: PLC0415 - imports models: not while apps load

    index_config_apply_once(connection)


def _import_tasks() -> None:
    from pmd_site import tasks  # noqa: F401, PLC0415 - registers them; with celery, on first work only
