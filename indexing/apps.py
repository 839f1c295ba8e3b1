from django.apps import AppConfig


class IndexingConfig(AppConfig):
    name = "indexing"
    verbose_name = "Indexing"
    default_auto_field = "django.db.models.BigAutoField"
