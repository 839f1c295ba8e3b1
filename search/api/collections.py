"""/api/collections: list and show collections; add, rename, remove, re-index and embed them (staff)."""

from django.conf import settings
from ninja import Field, Router, Schema, Status
from ninja.pagination import LimitOffsetPagination, paginate

from indexing.selectors import collection_detail as collection_counts
from indexing.selectors import collections_overview
from indexing.services.background import embedding_request, index_request
from indexing.services.collections import collection_get, collection_remove
from indexing.services.collections import collection_rename as rename
from indexing.services.refresh import collection_add as add_collection
from search.api.auth import is_staff, require_staff
from search.api.schemas import ErrorOut, JobOut, job_row

router = Router(tags=["collections"])


class CollectionOut(Schema):
    name: str
    uri: str
    path: str | None = Field(None, description="the folder on the server (staff only)")
    mask: str
    documents: int
    inactive: int
    problems: int
    last_indexed_at: str | None


def _collection_row(row: dict, *, staff: bool) -> dict:
    """Where a collection lives on the server is an internal: members see its name and counts."""
    return {"name": row["name"], "uri": f"pmd://{row['name']}/", "path": row["path"] if staff else None,
            "mask": row["mask"],
            "documents": row["documents"], "inactive": row["inactive"], "problems": row["problems"],
            "last_indexed_at": row["last_indexed_at"].isoformat() if row["last_indexed_at"] else None}


def _collection_overview(name: str, *, staff: bool) -> dict:
    return _collection_row(collection_counts(collection_get(name)), staff=staff)  # unknown → 404 with suggestions


@router.get("", response=list[CollectionOut], summary="Collections with document counts")
@paginate(LimitOffsetPagination)
def collections_list(request):
    staff = is_staff(request)
    return [_collection_row(r, staff=staff) for r in sorted(collections_overview(), key=lambda r: r["name"])]


class CollectionIn(Schema):
    path: str = Field(..., min_length=1, max_length=4096, description="folder on the server")
    name: str | None = Field(None, max_length=200)
    mask: str | None = Field(None, max_length=500)
    ignore: list[str] = []
    index: bool = Field(True, description="index it right away (a job)")


class CollectionCreatedOut(Schema):
    collection: CollectionOut
    job: JobOut | None


def _started(job) -> dict:
    job.refresh_from_db()  # eager tasks or a fast thread may have moved it on
    return job_row(job)


@router.post("", response={201: CollectionCreatedOut, 400: ErrorOut, 403: ErrorOut, 409: ErrorOut},
             summary="Add a folder as a collection (staff)")
def collection_add(request, body: CollectionIn):
    require_staff(request)
    added = add_collection(path=body.path, name=body.name, mask=body.mask, ignore_patterns=body.ignore,
                           allowed_roots=settings.PMD_COLLECTION_ROOTS, index="job" if body.index else "no",
                           created_by=request.auth)
    return Status(201, {"collection": _collection_overview(added.collection.name, staff=True),
                        "job": _started(added.job) if added.job else None})


@router.get("/{name}", response={200: CollectionOut, 404: ErrorOut})
def collection_detail(request, name: str):
    return _collection_overview(name, staff=is_staff(request))


class CollectionPatch(Schema):
    name: str = Field(..., min_length=1, max_length=200, description="the new name")


@router.patch("/{name}", response={200: CollectionOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut},
              summary="Rename a collection (staff)")
def collection_rename(request, name: str, body: CollectionPatch):
    require_staff(request)
    renamed = rename(name=name, new_name=body.name)
    return _collection_overview(renamed.name, staff=True)


class DeletedOut(Schema):
    deleted: str
    documents: int


@router.delete("/{name}", response={200: DeletedOut, 403: ErrorOut, 404: ErrorOut},
               summary="Remove a collection and its documents from the index (staff)")
def collection_delete(request, name: str):
    require_staff(request)
    return {"deleted": name, "documents": collection_remove(name=name)}


@router.post("/{name}/reindex", response={202: JobOut, 403: ErrorOut, 404: ErrorOut},
             summary="Re-scan the folder (staff); returns a job to follow at /api/jobs/{id}")
def collection_reindex(request, name: str):
    require_staff(request)
    return Status(202, _started(index_request(collection=collection_get(name), created_by=request.auth)))


@router.post("/{name}/embed", response={202: JobOut, 403: ErrorOut, 404: ErrorOut},
             summary="Compute missing embeddings (staff); returns a job")
def collection_embed(request, name: str, force: bool = False):
    # The job runs on a worker or, without one, in a thread here: the request itself never needs the model.
    require_staff(request)
    collection = collection_get(name)
    return Status(202, _started(embedding_request(collection=collection, force=force, created_by=request.auth)))
