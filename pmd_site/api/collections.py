"""/api/collections: list and show collections; add, rename, remove, re-index and embed them (staff)."""

from django.conf import settings
from ninja import Field, Router, Schema, Status
from ninja.pagination import LimitOffsetPagination, paginate

from indexing.selectors import collection_detail as detail_of
from indexing.selectors import collections_overview
from indexing.services.collections import collection_configure, collection_remove
from indexing.services.collections import collection_rename as rename
from indexing.services.refresh import collection_add as add_collection
from indexing.services.refresh import collection_embed_job, collections_refresh
from indexing.services.sharing import collection_share, collection_writers
from pmd_site.api.auth import is_staff
from pmd_site.api.schemas import ErrorOut, JobOut, job_row

router = Router(tags=["collections"])


class CollectionOut(Schema):
    name: str
    uri: str
    path: str | None = Field(None, description="the folder on the server (staff only)")
    mask: str
    title_from: str = Field(
        ..., description="heading (frontmatter title, first level-1 heading, file name) or filename"
    )
    transclude: bool = Field(False, description="a note is found by the words of the notes and sections it embeds")
    language: str = Field("", description="language of its notes (stemming and stop words)")
    text_search_config: str = Field("", description="PostgreSQL text search configuration it uses")
    documents: int
    inactive: int
    problems: int
    last_indexed_at: str | None
    visibility: str = Field(..., description="everyone, shared (chosen groups and people) or private")
    owner: str | None = None
    shared_users: list[str] = Field(default_factory=list, description="staff only")
    shared_groups: list[str] = Field(default_factory=list, description="staff only")
    writable: bool = Field(False, description="notes may be written through pmd (by its writers)")
    writer_users: list[str] = Field(default_factory=list, description="staff only")
    writer_groups: list[str] = Field(default_factory=list, description="staff only")


def _collection_row(row, *, staff: bool) -> dict:
    """Where a collection lives and whom it is shared with are for staff: members see its name and counts."""
    row = row.as_dict()
    return {
        "name": row["name"],
        "uri": f"pmd://{row['name']}/",
        "path": row["path"] if staff else None,
        "mask": row["mask"],
        "title_from": row["title_from"],
        "transclude": row["transclude"],
        "language": row["language"],
        "text_search_config": row["text_search_config"],
        "documents": row["documents"],
        "inactive": row["inactive"],
        "problems": row["problems"],
        "last_indexed_at": row["last_indexed_at"].isoformat() if row["last_indexed_at"] else None,
        "visibility": row["visibility"],
        "owner": row["owner"],
        "shared_users": row["shared_users"] if staff else [],
        "shared_groups": row["shared_groups"] if staff else [],
        "writable": row["writable"],
        "writer_users": row["writer_users"] if staff else [],
        "writer_groups": row["writer_groups"] if staff else [],
    }


def _collection_overview(request, name: str) -> dict:
    access = request.auth  # a collection the caller does not see: 404, as if it never existed
    return _collection_row(detail_of(name=name, access=access), staff=access.is_staff)


@router.get("", response=list[CollectionOut], summary="Collections you can see, with document counts")
@paginate(LimitOffsetPagination)
def collections_list(request):
    staff = is_staff(request)
    return [_collection_row(r, staff=staff) for r in collections_overview(access=request.auth)]  # by name


class CollectionIn(Schema):
    path: str = Field(..., min_length=1, max_length=4096, description="folder on the server")
    name: str | None = Field(None, max_length=200)
    mask: str | None = Field(None, max_length=500)
    formats: list[str] = Field(
        [], description="formats to read besides markdown, instead of a mask: pdf, docx, pptx, xlsx, html, epub, text"
    )
    ignore: list[str] = []
    language: str | None = Field(
        None, max_length=63, description="auto (default: detected from the notes), a code such as de, or none"
    )
    config: str | None = Field(
        None, max_length=63, description="expert form of language: a PostgreSQL text search configuration"
    )
    index: bool = Field(True, description="index it right away (a job)")
    visibility: str = Field("everyone", description="everyone, shared or private (share it afterwards)")
    title_from: str | None = Field(
        None,
        description="heading or filename; default: filename for an Obsidian "
        "vault (a folder holding .obsidian/), else heading",
    )
    transclude: bool = Field(False, description="find a note by the words of the notes and sections it embeds")


class CollectionCreatedOut(Schema):
    collection: CollectionOut
    job: JobOut | None


def _started(job) -> dict:
    job.refresh_from_db()  # eager tasks or a fast thread may have moved it on
    return job_row(job)


@router.post(
    "",
    response={201: CollectionCreatedOut, 400: ErrorOut, 403: ErrorOut, 409: ErrorOut},
    summary="Add a folder as a collection (staff)",
)
def collection_add(request, body: CollectionIn):
    added = add_collection(
        path=body.path,
        name=body.name,
        mask=body.mask,
        formats=body.formats,
        ignore_patterns=body.ignore,
        language=body.language,
        text_search_config=body.config,
        allowed_roots=settings.PMD_COLLECTION_ROOTS,
        index="job" if body.index else "no",
        access=request.auth,
        visibility=body.visibility,
        title_from=body.title_from,
        transclude=body.transclude,
    )
    return Status(
        201,
        {
            "collection": _collection_overview(request, added.collection.name),
            "job": _started(added.job) if added.job else None,
        },
    )


@router.get("/{name}", response={200: CollectionOut, 404: ErrorOut})
def collection_detail(request, name: str):
    return _collection_overview(request, name)


class CollectionPatch(Schema):
    name: str | None = Field(None, min_length=1, max_length=200, description="the new name")
    transclude: bool | None = Field(None, description="find a note by the words of what it embeds")
    title_from: str | None = Field(None, description="heading or filename (read again at the next re-index)")
    writable: bool | None = Field(None, description="let its writers write notes in it through pmd")
    writer_users: list[str] | None = Field(None, description="people who may write notes in it")
    writer_groups: list[str] | None = Field(None, description="groups whose members may write notes in it")


@router.patch(
    "/{name}",
    response={200: CollectionOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut},
    summary="Rename a collection or change how its notes are read (staff)",
)
def collection_rename(request, name: str, body: CollectionPatch):
    if body.transclude is not None or body.title_from is not None:
        name = collection_configure(
            name=name, access=request.auth, transclude=body.transclude, title_from=body.title_from
        ).name
    if body.writable is not None or body.writer_users is not None or body.writer_groups is not None:
        collection_writers(
            name=name,
            access=request.auth,
            writable=body.writable,
            users=body.writer_users,
            groups=body.writer_groups,
        )
    if body.name is not None:
        name = rename(name=name, new_name=body.name, access=request.auth).name
    return _collection_overview(request, name)


class ShareIn(Schema):
    visibility: str = Field(..., description="everyone, shared (with the groups and users below) or private")
    users: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)


@router.put(
    "/{name}/sharing",
    response={200: CollectionOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    summary="Set who sees a collection (staff, write scope)",
)
def collection_sharing(request, name: str, body: ShareIn):
    shared = collection_share(
        name=name, access=request.auth, visibility=body.visibility, users=body.users, groups=body.groups
    )
    return _collection_overview(request, shared.collection.name)


class DeletedOut(Schema):
    deleted: str
    documents: int


@router.delete(
    "/{name}",
    response={200: DeletedOut, 403: ErrorOut, 404: ErrorOut},
    summary="Remove a collection and its documents from the index (staff)",
)
def collection_delete(request, name: str):
    return {"deleted": name, "documents": collection_remove(name=name, access=request.auth)}


@router.post(
    "/{name}/reindex",
    response={202: JobOut, 403: ErrorOut, 404: ErrorOut},
    summary="Re-scan the folder (staff); returns a job to follow at /api/jobs/{id}",
)
def collection_reindex(request, name: str):
    return Status(202, _started(collections_refresh(names=[name], in_job=True, access=request.auth).job))


@router.post(
    "/{name}/embed",
    response={202: JobOut, 403: ErrorOut, 404: ErrorOut},
    summary="Compute missing embeddings (staff); returns a job",
)
def collection_embed(request, name: str, force: bool = False):
    # The job runs on a worker or, without one, in a thread here: the request itself never needs the model.
    return Status(202, _started(collection_embed_job(name=name, access=request.auth, force=force)))
