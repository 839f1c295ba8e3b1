from django.contrib import admin
from django.urls import path

from search.api import api

from pmd_site.views import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
]
