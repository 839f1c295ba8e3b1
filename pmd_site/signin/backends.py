"""Authentication backends: who may use the password form, and what keeps a provider's session."""

from __future__ import annotations

from django.contrib.auth.backends import ModelBackend

from indexing.services.accounts import password_login_allowed


class PasswordBackend(ModelBackend):
    """The password form: Django's check, refused for everyone but the break-glass accounts
    when PMD_PASSWORD_LOGIN is off (people sign in through the team's identity provider)."""

    def user_can_authenticate(self, user) -> bool:
        return super().user_can_authenticate(user) and password_login_allowed(user)


class ProviderBackend(ModelBackend):
    """Sessions begun by an OpenID provider or the forward-auth proxy. It checks no password
    (`authenticate` answers nothing); loading the session's user still drops a deactivated one
    at once."""

    def authenticate(self, request, **credentials):
        return None
