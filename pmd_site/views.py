"""Site-wide endpoints that belong to no app: `/healthz` for container health checks."""

from __future__ import annotations

from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from pmd_site.runtime.database_health import (
    DatabaseUnavailable,
    database_available,
    is_unavailable,
    note_failure,
)


@never_cache
@require_GET
def healthz(request):
    """200 when the database answers, 503 otherwise. No login: orchestrators call it."""
    try:
        if not database_available():  # known to be down: answer now, not after the pool's timeout
            raise DatabaseUnavailable
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - any failure means "not healthy"
        if is_unavailable(exc):
            note_failure(exc)  # after a restart: a fresh connection pool for the next call
        return JsonResponse({"status": "unavailable", "database": False, "error": exc.__class__.__name__}, status=503)
    return JsonResponse({"status": "ok", "database": True})
