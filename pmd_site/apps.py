from django.apps import AppConfig


class PmdSiteConfig(AppConfig):
    """The faces and their wiring. As an app, Django finds its admin (pmd_site/admin)."""

    name = "pmd_site"
    verbose_name = "pmd"

    def ready(self) -> None:
        # The celery tasks register with indexing/services/background.py, which starts them; it
        # imports them (and celery) when work is first asked for, not in every read-only command.
        # A worker finds them through celery's autodiscovery (pmd_site/celery.py).
        from indexing.services import background

        background.task_loader(_import_tasks)


def _import_tasks() -> None:
    from pmd_site import tasks  # noqa: F401 - importing registers them
