"""Path contexts: text that describes part of the knowledge base for searchers and agents."""

from __future__ import annotations

from pathlib import Path

from indexing import errors
from indexing.access import (
    Access,
    collection_visible,
    require_write,
    visible_collections,
)
from indexing.models import Collection, PathContext
from indexing.paths import normalize_relative, parse_virtual
from indexing.services.audit import audit_record


def resolve_context_target(target: str, access: Access) -> tuple[Collection | None, str]:
    """`/` (global), `pmd://coll/prefix`, `coll/prefix`, `coll`, or a filesystem path inside a
    collection, among the collections `access` sees."""
    target = (target or "/").strip()
    if target in {"/", ""}:
        return None, ""
    try:
        if target.startswith("pmd://"):
            name, prefix = parse_virtual(target)
            return collection_visible(name, access), prefix
    except errors.InvalidPath as exc:
        raise errors.InvalidContext(str(exc)) from None
    fs_path = Path(target).expanduser()
    if fs_path.is_absolute() or fs_path.exists():
        resolved = fs_path.resolve()
        for collection in visible_collections(access):
            root = Path(collection.root_path)
            if resolved == root or root in resolved.parents:
                return collection, resolved.relative_to(root).as_posix().strip(".")
        raise errors.InvalidContext(f"{fs_path} is not inside any collection")
    name, _, prefix = target.partition("/")
    try:
        return collection_visible(name, access), normalize_relative(prefix)
    except errors.InvalidPath as exc:
        raise errors.InvalidContext(str(exc)) from None


def context_set(*, target: str, text: str, access: Access) -> PathContext:
    require_write(access)
    text = text.strip()
    if not text:
        raise errors.InvalidContext("context text is empty")
    collection, prefix = resolve_context_target(target, access)
    context, created = PathContext.objects.update_or_create(
        collection=collection, path_prefix=prefix.strip("/"), defaults={"text": text}
    )
    audit_record(access, "context.add" if created else "context.change", context.target, text=text[:500])
    return context


def context_remove(*, target: str, access: Access) -> int:
    require_write(access)
    collection, prefix = resolve_context_target(target, access)
    contexts = PathContext.objects.filter(collection=collection, path_prefix=prefix.strip("/"))
    found = contexts.select_related("collection").first()
    deleted, _ = contexts.delete()
    if not deleted:
        raise errors.ContextNotFound(f"no context at {target}")
    audit_record(access, "context.remove", found.target)
    return deleted
