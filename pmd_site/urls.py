from django.contrib import admin
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from pmd_site import accounts
from pmd_site.api import api
from pmd_site.views import healthz
from pmd_site.web.views import signin

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    # API tokens moved from the search app to indexing: old admin links still work.
    re_path(
        r"^admin/search/(?P<rest>(?:apitoken|tokenfailure)/.*)$",
        RedirectView.as_view(url="/admin/indexing/%(rest)s", query_string=True),
    ),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    # Before django.contrib.auth.urls, which has the same names: reset only where email works.
    path("accounts/login/", accounts.LoginView.as_view(), name="login"),
    path("accounts/logout/", signin.sign_out, name="logout"),  # and out of the identity provider
    path("accounts/oidc/<slug:provider_id>/login/", signin.oidc_login, name="oidc_login"),
    path("accounts/oidc/<slug:provider_id>/callback/", signin.oidc_callback, name="oidc_callback"),
    path("accounts/password_reset/", accounts.password_reset, name="password_reset"),
    path("accounts/password_reset/done/", accounts.password_reset_done, name="password_reset_done"),
    path("accounts/reset/<uidb64>/<token>/", accounts.password_reset_confirm, name="password_reset_confirm"),
    path("accounts/reset/done/", accounts.password_reset_complete, name="password_reset_complete"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("pmd_site.oauth.urls")),  # OAuth for remote agents (PMD_OAUTH)
    path("", include("pmd_site.web.urls")),
]

# An unreachable database outside a view (a middleware, a session save) is a 503, not a 500.
handler500 = "pmd_site.runtime.database_health.server_error"
