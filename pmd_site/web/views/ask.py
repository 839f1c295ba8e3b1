"""The Ask mode of the search page: the answer streamed as server-sent events, its citations linked
to the document view at their line, follow-ups and deleting a conversation (search.pipeline.answer)."""

from __future__ import annotations

import re

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, StreamingHttpResponse
from django.template.loader import render_to_string
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_POST

from indexing.errors import PmdError
from indexing.services.answers import conversation_delete
from pmd_site.web.errors import problem_for
from pmd_site.web.pages import access_of
from pmd_site.web.views.search import document_url
from search import AskRequest, ask_open, ask_sse, filters_from_options, sse_event

_CITE = re.compile(r"\[(\d+)\]")


def answer_html(answer, *, request) -> str:
    """The checked answer with each [n] a link to its passage's line, the sources, the cost."""
    by_number = {p.number: p for p in answer.passages}

    def link(match: re.Match) -> str:
        passage = by_number.get(int(match.group(1)))
        if passage is None:
            return match.group(0)
        url = document_url(passage.collection, passage.path, line=passage.line)
        return f'<a class="cite" href="{escape(url)}" title="{escape(passage.source)}">[{passage.number}]</a>'

    text = _CITE.sub(link, str(escape(answer.text)))
    sources = [
        {"passage": p, "url": document_url(p.collection, p.path, line=p.line), "cited": p.number in answer.cited}
        for p in answer.passages
    ]
    nearest = [{**n, "url": document_url(n["collection"], n["path"], line=n["line"])} for n in answer.nearest]
    return render_to_string(
        "web/_answer.html",
        {"answer": answer, "text": mark_safe(text.replace("\n", "<br>")), "sources": sources, "nearest": nearest},
        request=request,
    )


@login_required
@require_GET
def ask_stream(request):
    """Server-sent events: `passages`, `token` ({text}), `done` ({html}: the checked answer). A closed
    page closes this stream, which stops the model."""
    access = access_of(request)
    names = request.GET.getlist("collection")
    ask = AskRequest(
        question=request.GET.get("q", "")[:2000],
        access=access,
        collections=[n for n in names if n],
        filters=filters_from_options(after=request.GET.get("after") or None, before=request.GET.get("before") or None),
        conversation=request.GET.get("conversation") or None,
    )
    try:
        events = ask_sse(
            ask_open(ask),
            done=lambda answer: {"html": answer_html(answer, request=request), "conversation": answer.conversation},
        )
    except PmdError as exc:
        problem = problem_for(exc, search=True)
        html = render_to_string("web/_results.html", {"problem": problem}, request=request)
        events = iter([sse_event("done", {"html": html})])
    response = StreamingHttpResponse(events, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


@login_required
@require_POST
def ask_forget(request, conversation):
    """Delete one of the asker's conversations."""
    try:
        conversation_delete(access=access_of(request), conversation=conversation)
    except PmdError as exc:
        return HttpResponse(escape(str(exc)), status=exc.http_status)
    return HttpResponse('<p class="muted">Conversation deleted.</p>')
