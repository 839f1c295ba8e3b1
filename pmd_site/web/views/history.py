"""The History page: search the git history of the collections the member sees.

Calls search.pipeline.history.history_search, as `pmd history`, /api/history and the MCP tool do.
Each changed file links to the note as it is now when it still exists; the diff excerpt is shown.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.views.decorators.http import require_GET

from indexing.access import visible_collection_names
from indexing.errors import PmdError
from pmd_site.web.errors import problem_for
from pmd_site.web.pages import access_of, page
from pmd_site.web.views.search import document_url
from search import HistoryRequest, history_search

FIELDS = ("q", "collection", "path", "author", "after", "before")


@login_required
@require_GET
def history_page(request):
    access = access_of(request)
    values = {name: request.GET.get(name, "").strip()[:1000] for name in FIELDS}
    context = {**values, "collections": visible_collection_names(access), "searched": False, "results": []}
    if values["q"] or values["path"] or values["author"] or values["after"] or values["before"]:
        context["searched"] = True
        try:
            response = history_search(
                HistoryRequest(
                    query=values["q"],
                    access=access,
                    collections=[values["collection"]] if values["collection"] else [],
                    paths=[values["path"]] if values["path"] else [],
                    author=values["author"],
                    after=values["after"] or None,
                    before=values["before"] or None,
                    limit=20,
                    diff=True,
                )
            )
        except PmdError as exc:
            context["problem"] = problem_for(exc, search=True)
        else:
            context["warnings"] = response.warnings
            context["results"] = [
                {
                    "hit": hit,
                    "files": [
                        {"file": f, "url": document_url(hit.collection, f.path) if f.docid else ""} for f in hit.files
                    ],
                    "diff": [
                        {
                            "text": line,
                            "kind": "add"
                            if line.startswith("+") and not line.startswith("+++")
                            else "del"
                            if line.startswith("-") and not line.startswith("---")
                            else "",
                        }
                        for line in (hit.diff or "").splitlines()
                    ],
                }
                for hit in response.results
            ]
    return page(request, "web/history.html", context)
