"""The collections page: counts, who sees each collection and its latest job; adding one, sharing
it, reindex/embed, job progress. Only collections the member sees appear (collections_overview)."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group
from django.db.models import F, Window
from django.db.models.functions import RowNumber
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from indexing.access import collection_visible
from indexing.convert import formats_of_mask
from indexing.errors import CollectionNotFound, PmdError
from indexing.models import FileProblem, Job
from indexing.problems import counts_text, kind_order, problem_counts
from indexing.selectors import collection_detail, collections_overview, jobs_visible_to
from indexing.services.background import embedding_request
from indexing.services.embedding import embedding_status
from indexing.services.jobs import jobs_recover
from indexing.services.model_server import model_server_problem
from indexing.services.refresh import collection_add as add_collection
from indexing.services.refresh import collection_embed_job, collection_set, collections_refresh
from indexing.services.sharing import collection_share as share_collection
from indexing.services.sharing import collection_writers
from pmd_site.reports.readable import job_words
from pmd_site.web.errors import form_problems
from pmd_site.web.forms import CollectionAddForm, CollectionFormatsForm, CollectionShareForm, CollectionWritersForm
from pmd_site.web.pages import access_of, page, staff_required, wants_fragment

log = logging.getLogger(__name__)


def _row(detail) -> dict:
    """A collection as the page's templates read it: the selector's fields, then the page's own."""
    return detail.as_dict() | {"collection": detail.collection}


def _collection_rows(access) -> list[dict]:
    rows = [_row(detail) for detail in collections_overview(access=access)]
    latest: dict[int, Job] = {}
    for job in jobs_visible_to(access).filter(collection__isnull=False).order_by("-created_at")[:200]:
        latest.setdefault(job.collection_id, job)
    for row in rows:
        row["job"] = latest.get(row["collection"].id)
        row["embedded"] = row["stale"] = None
    shown = [row["collection"].id for row in rows if row["problems"] and row["job"] and row["job"].finished]
    problems: dict[int, list[FileProblem]] = {}
    # errors first, then warnings, then unresolved links (indexing.problems)
    first = Window(RowNumber(), partition_by=[F("collection_id")], order_by=[kind_order().asc(), F("path").asc()])
    for problem in (
        FileProblem.objects.filter(collection_id__in=shown)
        .annotate(n=first, rank=kind_order())
        .filter(n__lte=50)
        .order_by("collection_id", "rank", "path")
    ):  # one query for every row: the first 50 of each
        problems.setdefault(problem.collection_id, []).append(problem)
    for row in rows:
        row["file_problems"] = problems.get(row["collection"].id, [])
        row["problem_counts"] = (
            counts_text(problem_counts(access, collection_id=row["collection"].id)) if row["problems"] else ""
        )
        if row["job"] is not None:
            row["job"].words = job_words(row["job"])
    for row in rows:
        try:
            status = embedding_status(collections=[row["name"]])
        except Exception as exc:  # noqa: BLE001 - counts are decoration; the page must render
            log.warning("embedding counts unavailable: %s", exc)
            break
        row["embedded"], row["stale"] = status.get("embedded"), status.get("pending")
    return rows


def _people_and_groups() -> dict:
    """What a collection can be shared with: the groups and the active accounts, by name."""
    user_model = get_user_model()
    return {
        "groups": list(Group.objects.order_by("name").values_list("name", flat=True)),
        "users": list(
            user_model.objects.filter(is_active=True)
            .order_by(user_model.USERNAME_FIELD)
            .values_list(user_model.USERNAME_FIELD, flat=True)
        ),
    }


def _share_form(row: dict, choices: dict) -> CollectionShareForm:
    """The sharing control of one row, showing its current sharing."""
    initial = {"visibility": row["visibility"], "groups": row["shared_groups"], "users": row["shared_users"]}
    return CollectionShareForm(initial=initial, auto_id=f"share-{row['collection'].id}-%s", **choices)


def _writers_form(row: dict, choices: dict) -> CollectionWritersForm:
    """The writers control of one row, showing who writes now."""
    initial = {"writable": row["writable"], "groups": row["writer_groups"], "users": row["writer_users"]}
    return CollectionWritersForm(initial=initial, auto_id=f"writers-{row['collection'].id}-%s", **choices)


def _formats_form(row: dict) -> CollectionFormatsForm:
    """The formats control of one row: the formats its mask reads (none checked for a mask of its own)."""
    return CollectionFormatsForm(
        initial={"formats": formats_of_mask(row["mask"]) or []}, auto_id=f"formats-{row['collection'].id}-%s"
    )


def _collections_context(
    request, form: CollectionAddForm, shared: tuple[str, CollectionShareForm] | None = None
) -> dict:
    """`shared`: (name, form) of a sharing change that failed, shown again on its row."""
    # Jobs for several collections at once (e.g. "embed everything") are shown above the table.
    access = access_of(request)
    general = list(jobs_visible_to(access).filter(collection__isnull=True).order_by("-created_at")[:1])
    rows = _collection_rows(access)
    if request.user.is_staff:
        choices = _people_and_groups()
        for row in rows:
            row["share_form"] = shared[1] if shared and shared[0] == row["name"] else _share_form(row, choices)
            row["writers_form"] = _writers_form(row, choices)
            row["formats_form"] = _formats_form(row)
            result = row["job"].result if row["job"] and isinstance(row["job"].result, dict) else {}
            row["not_read"] = result.get("not_read") or {}
    return {
        "rows": rows,
        "form": form,
        "collection_roots": [str(root) for root in settings.PMD_COLLECTION_ROOTS] if request.user.is_staff else [],
        "general_jobs": [_worded(j) for j in general if not j.finished or str(j.pk) == request.GET.get("job")],
    }


@login_required
@require_GET
def collections_page(request):
    return page(request, "web/collections.html", _collections_context(request, CollectionAddForm()))


@staff_required
@require_POST
def embed_all(request):
    """The "run embedding" button of the search page's no-embeddings state."""
    blocked = model_server_problem()
    job = embedding_request(created_by=request.user)
    if blocked is not None:
        messages.warning(
            request,
            f"Embedding is queued but cannot run now: {blocked.message}. "
            "It starts by itself once the model server answers.",
        )
    return redirect(reverse("search:collections") + f"?job={job.pk}")


@staff_required
@require_POST
def collection_add(request):
    form = CollectionAddForm(request.POST)
    if form.is_valid():
        with form_problems(form):
            collection = add_collection(
                path=form.cleaned_data["path"],
                name=form.cleaned_data["name"] or None,
                mask=form.cleaned_data["mask"] or None,
                formats=form.cleaned_data["formats"] or None,
                language=form.cleaned_data["language"] or None,
                allowed_roots=settings.PMD_COLLECTION_ROOTS,
                index="job",
                access=access_of(request),
                visibility=form.cleaned_data["visibility"],
                title_from=form.cleaned_data["title_from"] or None,
                transclude=form.cleaned_data["transclude"],
            ).collection
    if form.errors:
        return page(request, "web/collections.html", _collections_context(request, form), status=400)
    messages.success(
        request, f"Added collection {collection.name} (language: {collection.language_choice.label}); indexing started."
    )
    return redirect("search:collections")


@staff_required
@require_POST
def collection_share(request, name: str):
    """The sharing control of a row: one POST sets who sees the collection (audited by the service).

    htmx gets the row's sharing fragment back (422 with the problems, which base.html lets htmx
    swap in); a plain form post is redirected to the page, or gets the page again with the problems."""
    access = access_of(request)
    collection = collection_visible(name, access)  # one they do not see: the 404 of a name never created
    choices = _people_and_groups()
    form = CollectionShareForm(request.POST, auto_id=f"share-{collection.id}-%s", **choices)
    if form.is_valid():
        with form_problems(form):
            share_collection(
                name=collection.name,
                access=access,
                visibility=form.cleaned_data["visibility"],
                users=form.cleaned_data["users"],
                groups=form.cleaned_data["groups"],
            )
    try:  # asked afresh: the change may have taken the collection out of what this member sees
        row = _row(collection_detail(name=collection.name, access=access_of(request)))
    except CollectionNotFound:  # made private to someone else: gone from this member's page
        messages.info(request, "Sharing saved; you no longer see that collection.")
        return _back_to_collections(request)
    if wants_fragment(request):
        row["share_form"] = form if form.errors else _share_form(row, choices)
        return page(
            request, "web/_sharing.html", {"row": row, "saved": not form.errors}, status=422 if form.errors else 200
        )
    if form.errors:
        return page(
            request,
            "web/collections.html",
            _collections_context(request, CollectionAddForm(), shared=(collection.name, form)),
            status=400,
        )
    messages.success(request, f"Sharing of {collection.name} saved.")
    return _back_to_collections(request)


@staff_required
@require_POST
def collection_writers_set(request, name: str):
    """The writers control of a row: whether notes may be written and by whom (audited by the service)."""
    access = access_of(request)
    collection = collection_visible(name, access)  # one they do not see: the 404 of a name never created
    form = CollectionWritersForm(request.POST, **_people_and_groups())
    if form.is_valid():
        try:
            collection_writers(
                name=collection.name,
                access=access,
                writable=form.cleaned_data["writable"],
                users=form.cleaned_data["users"],
                groups=form.cleaned_data["groups"],
            )
        except PmdError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"Writers of {collection.name} saved.")
    else:
        messages.error(request, "; ".join(e for errors in form.errors.values() for e in errors))
    return _back_to_collections(request)


@staff_required
@require_POST
def collection_formats(request, name: str):
    """The formats control of a row: the collection reads these besides markdown, indexed again in a job."""
    form = CollectionFormatsForm(request.POST)
    if form.is_valid():
        with form_problems(form):
            done = collection_set(
                name=name, access=access_of(request), formats=["md", *form.cleaned_data["formats"]], in_job=True
            )
    if form.errors:
        messages.error(request, " ".join(str(e) for errors in form.errors.values() for e in errors))
        return redirect("search:collections")
    job = done.refresh.job if done.refresh else None
    messages.success(
        request,
        f"{done.collection.name} reads {done.collection.mask} now"
        + ("; indexing started." if job else " (no change)."),
    )
    return redirect(reverse("search:collections") + (f"?job={job.pk}" if job else ""))


def _back_to_collections(request) -> HttpResponse:
    if getattr(request, "htmx", None):
        return HttpResponse(headers={"HX-Redirect": reverse("search:collections")})
    return redirect("search:collections")


@staff_required
@require_POST
def collection_action(request, name: str, action: str):
    start = {"reindex": _reindex_job, "embed": collection_embed_job}.get(action)
    if start is None:
        raise Http404("unknown action")
    job = start(name=name, access=access_of(request))  # a collection they do not see: 404
    collection = job.collection
    if getattr(request, "htmx", None):
        return _job_fragment(request, job)
    messages.success(request, f"{action.capitalize()} of {collection.name} started.")
    return redirect("search:collections")


def _reindex_job(*, name: str, access) -> Job:
    return collections_refresh(names=[name], in_job=True, access=access).job


def _worded(job: Job) -> Job:
    job.words = job_words(job)
    return job


def _job_fragment(request, job: Job) -> HttpResponse:
    problems = []
    if job.finished and job.collection_id and job.kind in {Job.Kind.INDEX, Job.Kind.UPDATE}:
        problems = list(FileProblem.objects.filter(collection_id=job.collection_id).order_by(kind_order(), "path")[:50])
    job.words = job_words(job)
    return page(request, "web/_job.html", {"job": job, "problems": problems})


@login_required
@require_GET
def job_progress(request, job_id):
    jobs_recover()  # a job whose worker died reads as failed, not running
    job = get_object_or_404(jobs_visible_to(access_of(request)), pk=job_id)  # someone else's job: 404, not 403
    response = _job_fragment(request, job)
    if job.finished and getattr(request, "htmx", None) and request.GET.get("poll"):
        # The job a page was following just ended: reload it so its counts are current.
        response.headers["HX-Refresh"] = "true"
    return response
