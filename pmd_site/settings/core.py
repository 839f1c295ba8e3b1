"""Django's own settings: where pmd's data lives, the secret key, apps, middleware, templates,
static files, time zone."""

from __future__ import annotations

import os
from pathlib import Path

from pmd_site import env
from pmd_site.runtime.server_files import private_dir
from pmd_site.settings.table import read

BASE_DIR = Path(__file__).resolve().parent.parent.parent
# The page templates sit at the checkout's top level; an installed package carries them as
# pmd_site/templates (setup.py maps the folder there).
_PACKAGED_TEMPLATES = BASE_DIR / "pmd_site" / "templates"
_TEMPLATES_DIR = _PACKAGED_TEMPLATES if _PACKAGED_TEMPLATES.is_dir() else BASE_DIR / "templates"
PMD_HOME = env.pmd_home()
PMD_INDEX = env.index_name()

DEBUG = read("PMD_DEBUG")
SECRET_KEY = read("PMD_SECRET_KEY")
if not SECRET_KEY:
    # A laptop install has no secret to configure: keep a generated one beside the data.
    _secret_file = PMD_HOME / "secret_key"
    try:
        SECRET_KEY = _secret_file.read_text().strip()
    except OSError:
        import secrets

        SECRET_KEY = secrets.token_urlsafe(50)
        try:
            private_dir(PMD_HOME, create_marker=True)
            _fd = os.open(_secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(_fd, "w") as _handle:
                _handle.write(SECRET_KEY)
        except OSError:
            pass

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "ninja",  # its templates and static files: /api/docs served by pmd, not a CDN
    "axes",
    "indexing",
    "search",  # no models of its own now: kept for its migrations' history
    "pmd_site",
]

MIDDLEWARE = [
    "pmd_site.security.TrustedProxyMiddleware",  # X-Forwarded-Proto from PMD_TRUSTED_PROXIES only
    "django.middleware.security.SecurityMiddleware",
    "pmd_site.security.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "pmd_site.runtime.database_health.DatabaseUnavailableMiddleware",  # 503 + Retry-After while PostgreSQL is away
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "pmd_site.web.forward_auth.ForwardAuthMiddleware",  # Remote-User from the trusted proxy (PMD_FORWARD_AUTH)
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "pmd_site.web.errors.WebErrorMiddleware",  # a service error in a web UI view: its page and status
    "axes.middleware.AxesMiddleware",  # last, as django-axes requires
]

ROOT_URLCONF = "pmd_site.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [_TEMPLATES_DIR],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "pmd_site.web.context.version",
            ],
        },
    },
]
ASGI_APPLICATION = "pmd_site.asgi.application"
WSGI_APPLICATION = "pmd_site.wsgi.application"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = read("PMD_TIME_ZONE")
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = read("PMD_STATIC_ROOT", PMD_HOME / "static")
STATICFILES_DIRS = [BASE_DIR / "pmd_site" / "web" / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
