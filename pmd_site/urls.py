from django.contrib import admin
from django.urls import include, path

from pmd_site.views import healthz
from search.api import api

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("search.urls")),
]

# An unreachable database outside a view (a middleware, a session save) is a 503, not a 500.
handler500 = "pmd_site.dbhealth.server_error"
