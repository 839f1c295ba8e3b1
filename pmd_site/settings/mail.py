"""Sending email (password resets, search digests): the SMTP server, only when one is configured."""

from __future__ import annotations

from pmd_site.settings.table import read

# Password reset by email is offered only when an SMTP server is configured.
EMAIL_HOST = read("PMD_EMAIL_HOST")
EMAIL_PORT = read("PMD_EMAIL_PORT")
EMAIL_HOST_USER = read("PMD_EMAIL_USER")
EMAIL_HOST_PASSWORD = read("PMD_EMAIL_PASSWORD")
EMAIL_USE_TLS = read("PMD_EMAIL_STARTTLS")
EMAIL_USE_SSL = read("PMD_EMAIL_SSL")
if EMAIL_USE_SSL:
    EMAIL_USE_TLS = False  # Django refuses both; implicit TLS wins when asked for
EMAIL_TIMEOUT = 20
DEFAULT_FROM_EMAIL = read("PMD_EMAIL_FROM")
