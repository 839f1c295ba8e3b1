"""The API tokens page. Everyone manages only their own tokens here (staff too; the admin lists everybody's)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from search.api_tokens import token_create, token_list, token_revoke
from search.web.errors import form_problems
from search.web.forms import TokenCreateForm
from search.web.pages import access_of, page


def _tokens_context(request, form: TokenCreateForm, created=None) -> dict:
    return {
        "tokens": token_list(user=request.user, include_revoked=True),
        "form": form,
        "created": created,
        "api_url": request.build_absolute_uri("/api/status"),
        "mcp_url": request.build_absolute_uri("/mcp"),  # pmd_site.asgi.MCP_PATH
    }


@login_required
@require_GET
def tokens_page(request):
    return page(request, "search/tokens.html", _tokens_context(request, TokenCreateForm()))


@login_required
@require_POST
def token_add(request):
    """Create a token; the raw value is in this one response only (no redirect, never cached)."""
    form = TokenCreateForm(request.POST)
    created = None
    if form.is_valid():
        with form_problems(form):
            created = token_create(user=request.user, name=form.cleaned_data["name"], access=access_of(request))
    response = page(request, "search/tokens.html",
                    _tokens_context(request, TokenCreateForm() if created else form, created),
                    status=200 if created else 400)
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
