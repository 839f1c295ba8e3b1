"""What every page of the web UI shares: how a page is rendered, when a fragment is enough, who is staff."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers

from indexing.access import Access


def page(request, template: str, context: dict, *, status: int = 200) -> HttpResponse:
    response = render(request, template, context, status=status)
    # The Content-Security-Policy comes from pmd_site.security's middleware, for every page.
    patch_vary_headers(response, ["HX-Request", "HX-Target"])
    return response


def wants_fragment(request, target: str | None = None) -> bool:
    """An htmx request (not a history restore) for the element `target` (any element with None)."""
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.history_restore_request and (target is None or htmx.target == target)


def access_of(request) -> Access:
    """The signed-in member, as the services see them (indexing.access)."""
    return Access.for_user(request.user)


def staff_required(view):
    """Collection management is for staff; others get a 403 that says so."""

    @wraps(view)
    @login_required
    def wrapper(request, *args, **kwargs):
        if not request.user.is_staff:
            raise PermissionDenied("managing collections needs a staff account")
        return view(request, *args, **kwargs)

    return wrapper
