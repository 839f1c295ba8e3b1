"""The web UI's sign-in through an identity provider: "Sign in with …", the provider's callback, sign-out."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import login, logout
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from indexing import errors
from indexing.services.accounts import ProviderSignIn, provider_sign_in
from pmd_site.signin import oidc
from pmd_site.web.errors import problem_response
from pmd_site.web.forward_auth import SESSION_KEY as FORWARD_SESSION_KEY

BACKEND = "pmd_site.signin.backends.ProviderBackend"
PENDING_KEY = "pmd_oidc_pending"  # state -> what the callback checks; each used once
SIGNED_IN_KEY = "pmd_oidc"  # provider and ID token of the session, for sign-out
PENDING_MAX = 5  # sign-ins started in other tabs and never finished
PENDING_SECONDS = 600


def _callback_uri(request, provider: oidc.Provider) -> str:
    return request.build_absolute_uri(reverse("oidc_callback", args=[provider.id]))


def _safe_next(request, target: str) -> str:
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return settings.LOGIN_REDIRECT_URL


def oidc_login(request, provider_id: str):
    """Off to the provider, with a fresh state, nonce and PKCE verifier kept in the session."""
    try:
        provider = oidc.provider_named(provider_id)
        url, pending = oidc.authorization_start(provider, redirect_uri=_callback_uri(request, provider))
    except errors.PmdError as exc:
        return problem_response(request, exc)
    pending["next"] = _safe_next(request, request.GET.get("next", ""))
    kept = request.session.get(PENDING_KEY, {})
    kept = dict(sorted(kept.items(), key=lambda item: item[1]["at"])[-(PENDING_MAX - 1) :])
    kept[pending["state"]] = pending
    request.session[PENDING_KEY] = kept
    return redirect(url)


def oidc_callback(request, provider_id: str):
    """The provider's answer: checked, the person signed in with the provider's groups."""
    kept = request.session.get(PENDING_KEY, {})
    pending = kept.pop(request.GET.get("state", ""), None)
    request.session[PENDING_KEY] = kept  # the state is spent, whatever happens next
    try:
        if pending is None or pending["provider"] != provider_id:
            raise errors.SignInFailed("this sign-in answer was already used or was never asked for: sign in again")
        if oidc.time.time() - pending["at"] > PENDING_SECONDS:
            raise errors.SignInFailed("this sign-in took too long: sign in again")
        provider = oidc.provider_named(provider_id)
        claims, id_token = oidc.authorization_finish(
            provider, pending, request.GET.dict(), redirect_uri=_callback_uri(request, provider)
        )
        groups = claims.get(settings.PMD_GROUPS_CLAIM)
        if isinstance(groups, str):
            groups = groups.split()
        user = provider_sign_in(
            signin=ProviderSignIn(
                provider=f"openid:{provider.id}",
                subject=str(claims["sub"]),
                username=str(claims.get(provider.username_claim) or claims["sub"]),
                email=str(claims.get("email") or ""),
                groups=[str(g) for g in groups] if isinstance(groups, list) else None,
                issuer=str(claims["iss"]),
            )
        )
    except errors.PmdError as exc:
        return problem_response(request, exc)
    login(request, user, backend=BACKEND)
    request.session[SIGNED_IN_KEY] = {"provider": provider.id, "id_token": id_token}
    return redirect(pending["next"])


@require_POST
def sign_out(request):
    """Sign out of pmd, and of the provider too where it supports RP-initiated logout."""
    signed_in = request.session.get(SIGNED_IN_KEY)
    forward = bool(request.session.get(FORWARD_SESSION_KEY))
    logout(request)
    after = request.build_absolute_uri(settings.LOGOUT_REDIRECT_URL)
    if signed_in:
        try:
            url = oidc.logout_url(
                oidc.provider_named(signed_in["provider"]), id_token=signed_in["id_token"], after=after
            )
        except errors.SignInFailed:
            url = None
        if url:
            return redirect(url)
    if forward and settings.PMD_FORWARD_AUTH_LOGOUT_URL:
        return redirect(settings.PMD_FORWARD_AUTH_LOGOUT_URL)
    return redirect(settings.LOGOUT_REDIRECT_URL)
