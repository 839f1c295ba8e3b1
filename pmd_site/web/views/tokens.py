"""The API tokens page. Everyone manages only their own tokens here (staff too; superusers see
everybody's in the admin).

A token is read-only unless "allow changes" is ticked, may be limited to some of the collections
its owner sees, and may expire; the service (indexing.services.tokens) checks and records all of it.
The OAuth clients the member allowed (indexing.services.oauth) are listed here too, each revocable.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from indexing.access import visible_collection_names
from indexing.models import ApiToken
from indexing.services.oauth import oauth_grant_revoke, oauth_grants
from indexing.services.tokens import token_create, token_list, token_revoke, token_scope
from pmd_site.web.errors import form_problems
from pmd_site.web.forms import TokenCreateForm
from pmd_site.web.pages import access_of, page


@dataclass
class TokenRow:
    token: ApiToken
    collections: list[str]  # the ones its owner still sees; a name they lost access to is not shown
    hidden: int  # how many more it names (they no longer reach them: the token does not either)


def _token_rows(request) -> list[TokenRow]:
    visible = set(visible_collection_names(access_of(request)))
    rows = []
    for token in token_list(user=request.user, include_revoked=True):
        names = token_scope(token)["collections"]
        shown = [n for n in names if n in visible]
        rows.append(TokenRow(token, shown, len(names) - len(shown)))
    return rows


def _token_form(request, data=None) -> TokenCreateForm:
    return TokenCreateForm(data, collection_names=visible_collection_names(access_of(request)))


def _tokens_context(request, form: TokenCreateForm, created=None) -> dict:
    return {
        "rows": _token_rows(request),
        "grants": oauth_grants(user=request.user),
        "form": form,
        "created": created,
        "api_url": request.build_absolute_uri("/api/status"),
        "mcp_url": request.build_absolute_uri("/mcp"),  # pmd_site.asgi.MCP_PATH
    }


@login_required
@require_GET
def tokens_page(request):
    return page(request, "web/tokens.html", _tokens_context(request, _token_form(request)))


@login_required
@require_POST
def token_add(request):
    """Create a token; the raw value is in this one response only (no redirect, never cached)."""
    form = _token_form(request, request.POST)
    created = None
    if form.is_valid():
        with form_problems(form):
            created = token_create(
                user=request.user,
                name=form.cleaned_data["name"],
                access=access_of(request),
                can_write=form.cleaned_data["can_write"],
                collections=form.cleaned_data["collections"],
                expires_in=form.cleaned_data["expires"],
            )
    response = page(
        request,
        "web/tokens.html",
        _tokens_context(request, _token_form(request) if created else form, created),
        status=200 if created else 400,
    )
    response.headers["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def token_remove(request, token_id: int):
    # Only the user's own tokens: anyone else's id is "no such token" (404), not a refusal.
    if not any(t.pk == token_id for t in token_list(user=request.user, include_revoked=True)):
        raise Http404("no such token")
    token = token_revoke(token=token_id, user=request.user, access=access_of(request))
    messages.success(request, f"Revoked token {token.prefix}… {token.name}".rstrip() + ".")
    return redirect("search:tokens")


@login_required
@require_POST
def oauth_grant_remove(request, grant_id: int):
    """Revoke an OAuth client's access: its access and refresh tokens stop working at once."""
    grant = oauth_grant_revoke(grant_id=grant_id, access=access_of(request))
    messages.success(request, f"Revoked the access of {grant.client}.")
    return redirect("search:tokens")
