from django.apps import AppConfig


class IndexingConfig(AppConfig):
    name = "indexing"
    verbose_name = "Indexing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The celery tasks register with indexing/services/background.py, which starts them; it
        # imports them (and celery) when work is first asked for, not in every read-only command.
        # A worker finds them through celery's autodiscovery (pmd_site/celery.py).
        from indexing.services import background

        background.task_loader(_import_tasks)
        # The rule that revokes a token whose only collections are removed is a signal receiver:
        # connected here, so every way of deleting a collection (admin, shell, CLI) runs it.
        from indexing import access  # noqa: F401


def _import_tasks() -> None:
    from indexing import tasks  # noqa: F401 - importing registers them
