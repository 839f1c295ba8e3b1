"""Saved searches in the browser: save the search on screen, list them, run one (its new results marked),
remove one of yours. The same services as `pmd saved` and /api/saved."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from indexing.errors import PmdError
from indexing.services.notify import email_configured
from indexing.services.saved_searches import saved_search_add, saved_search_digest_set, saved_search_remove
from pmd_site.web.pages import access_of, page
from search import mode_normalize, saved_search_run, saved_searches_listed


@login_required
@require_GET
def saved_page(request):
    access = access_of(request)
    rows = saved_searches_listed(access=access)
    groups = list(request.user.groups.values_list("name", flat=True))

    seconds = settings.PMD_DIGEST_INTERVAL
    interval = (
        ""
        if not seconds
        else "day"
        if seconds == 86400
        else f"{seconds / 3600:g} hours"
        if seconds >= 3600
        else f"{seconds} seconds"
    )
    return page(
        request, "web/saved.html", {"saved": rows, "groups": groups, "email": email_configured(), "interval": interval}
    )


@login_required
@require_POST
def saved_add(request):
    try:
        saved = saved_search_add(
            access=access_of(request),
            name=request.POST.get("name", ""),
            query=request.POST.get("q", ""),
            mode=mode_normalize(request.POST.get("mode") or "keyword"),
            collections=[request.POST["collection"]] if request.POST.get("collection") else [],
            group=request.POST.get("group") or None,
        )
        messages.success(request, f"Saved “{saved.name}”.")
    except (PmdError, ValueError) as exc:
        messages.error(request, str(exc))
    return redirect("search:saved")


@login_required
@require_GET
def saved_run(request, name: str):
    try:
        response, new = saved_search_run(access=access_of(request), name=name, face="web", limit=50)
    except PmdError as exc:
        messages.error(request, str(exc))
        return redirect("search:saved")
    fresh = set(new)
    rows = [{"result": r, "new": r.uri in fresh} for r in response.results]
    return page(request, "web/saved_run.html", {"name": name, "response": response, "rows": rows, "new": len(new)})


@login_required
@require_POST
def saved_digest(request, name: str):
    try:
        saved_search_digest_set(
            access=access_of(request),
            name=name,
            webhook_url=request.POST.get("webhook_url", ""),
            email_digest=request.POST.get("email_digest") == "on",
        )
        messages.success(request, f"“{name}” sends its digest as you chose.")
    except PmdError as exc:
        messages.error(request, str(exc))
    return redirect("search:saved")


@login_required
@require_POST
def saved_remove(request, name: str):
    try:
        saved_search_remove(access=access_of(request), name=name)
        messages.success(request, f"Removed “{name}”.")
    except PmdError as exc:
        messages.error(request, str(exc))
    return redirect("search:saved")
