from django.apps import AppConfig
from django.core.signals import request_started

from indexing.replicas import request_started as replica_request_started


class IndexingConfig(AppConfig):
    name = "indexing"
    verbose_name = "Indexing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The rule that revokes a token whose only collections are removed is a signal receiver:
        # connected here, so every way of deleting a collection (admin, shell, CLI) runs it.
        # A request starts having changed no notes: its reads may go to a replica (indexing/replicas.py).
        from indexing import access  # noqa: F401, PLC0415 - for its signal receiver; it imports the models

        request_started.connect(replica_request_started, dispatch_uid="pmd-replica-request-started")
