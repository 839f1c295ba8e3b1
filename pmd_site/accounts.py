"""Login and password-reset pages: reset by email only where pmd can send email.

Without an SMTP server (PMD_EMAIL_HOST) a reset form would accept an address, fail to send,
and still report success; instead every reset URL explains how an administrator sets a
password, and the login page offers no reset link.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.shortcuts import render

from pmd_site.signin.oidc import providers


def password_reset_enabled() -> bool:
    """Email can be sent (PMD_EMAIL_HOST); read per request, not frozen into the URL list."""
    return bool(settings.EMAIL_HOST)


class LoginView(auth_views.LoginView):
    """Django's login, telling the template whether to offer a reset link, which identity
    providers to offer and whether to show the password form."""

    def get_context_data(self, **kwargs):
        return {
            **super().get_context_data(**kwargs),
            "password_reset_enabled": password_reset_enabled(),
            "providers": providers(),
            # Under SSO the form stays reachable for the break-glass admin (?password=1).
            "password_form": settings.PMD_PASSWORD_LOGIN
            or bool(settings.PMD_LDAP_URL)
            or "password" in self.request.GET
            or self.request.method == "POST",
        }


def _only_with_email(view):
    """`view` when email is configured, else a 404 page pointing at `pmd user password NAME`."""

    def wrapper(request, *args, **kwargs):
        if not password_reset_enabled():
            return render(request, "registration/password_reset_unavailable.html", status=404)
        return view(request, *args, **kwargs)

    wrapper.__name__ = getattr(view, "__name__", "password_reset")
    return wrapper


password_reset = _only_with_email(auth_views.PasswordResetView.as_view())
password_reset_done = _only_with_email(auth_views.PasswordResetDoneView.as_view())
password_reset_confirm = _only_with_email(auth_views.PasswordResetConfirmView.as_view())
password_reset_complete = _only_with_email(auth_views.PasswordResetCompleteView.as_view())
