from django.apps import AppConfig


class IndexingConfig(AppConfig):
    name = "indexing"
    verbose_name = "Indexing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The celery tasks register with indexing/services/background.py, which starts them.
        # Imported here, not at the top: tasks imports models, which need the app registry loaded.
        from indexing import tasks  # noqa: F401
        # The rule that revokes a token whose only collections are removed is a signal receiver:
        # connected here, so every way of deleting a collection (admin, shell, CLI) runs it.
        from indexing import access  # noqa: F401
