"""The server's instructions: how to use the tools, plus what is in the index right now.

The description of the live index (collections, document counts, contexts) covers only what the
caller may see: it is built per set of visible collections, cached for INSTRUCTIONS_TTL seconds,
refreshed before a request reaches the server (the /mcp router, `pmd mcp`) and after pmd_status,
and read by the low-level server at initialize time.
"""

import contextlib
import threading
import time
from contextvars import ContextVar

import anyio

from indexing.access import Access
from indexing.selectors import collections_overview, context_list
from pmd_site.mcp.errors import tool_call

INSTRUCTIONS_TTL = 30.0  # seconds a description of the index stays fresh

BASE_INSTRUCTIONS = """\
pmd searches a markdown knowledge base. Start with pmd_search (fast keyword/BM25: exact terms,
names, identifiers); use pmd_vector_search for meaning when words differ; use pmd_deep_search
for hard questions (query expansion + keyword + vector + re-ranking; slower). Results give a
docid (#abc123), a pmd:// URI and a line: read the document with pmd_get (use from_line and
max_lines to read around the hit) or several at once with pmd_multi_get. Documents are also
resources at pmd://{collection}/{path} (optionally ?start=LINE&lines=N). Every search takes
filters, in the query (tag:db -tag:old path:meetings/** after:"last week" before:2025-06
status:draft) or as its `filters` argument, and sort="date" for newest first; filters alone list
the matching notes. Each result's date (and where it came from) is given. In collections a person
made writable for you, pmd_write_note creates a note and pmd_edit_note changes part of one, naming
the hash of the version you read (a write's new_hash, or the docid): a note changed since is
refused with its current hash. pmd_delete_note keeps the note in the trash; pmd_recent_activity
tells what changed and who changed it."""

# Who the current MCP connection acts as: set by the /mcp router (a token's access) and by
# `pmd mcp` on stdio (the local user). Unset, the instructions name no collection at all.
current_access: ContextVar[Access | None] = ContextVar("pmd_mcp_access", default=None)

_cache: dict[tuple | None, tuple[float, str]] = {}  # visible collection ids (None: all) → (built at, text)
_cache_lock = threading.Lock()


def _key(access: Access) -> tuple | None:
    ids = access.collection_ids()
    return None if ids is None else tuple(sorted(ids))


def build_instructions(access: Access) -> str:
    """The base text plus what `access` sees in the index right now (collections, counts, contexts)."""
    lines = [BASE_INSTRUCTIONS, "", "Collections:"]
    overview = collections_overview(access=access)  # by name
    contexts = context_list(access=access)
    for row in overview:
        lines.append(f"- pmd://{row.name}/ ({row.documents} documents)")
        for c in contexts:
            if c.collection_id == row.collection.id:
                lines.append(f"    {c.target}: {c.text}")
    if not overview:
        lines.append("- (none yet: the index is empty)")
    general = [c for c in contexts if c.collection_id is None]
    if general:
        lines += ["", "About this knowledge base:"] + [f"- {c.text}" for c in general]
    return "\n".join(lines)


def refresh_instructions(*, force: bool = False, access: Access | None = None) -> str:
    """The instructions for `access` (default: the connection's), rebuilt when stale.

    Sync (it reads the database): the router and `pmd mcp` call it before the server answers
    `initialize`, which then only reads the cache."""
    access = access or current_access.get()
    if access is None:
        return BASE_INSTRUCTIONS
    key = _key(access)
    with _cache_lock:
        cached = _cache.get(key)
        if not force and cached and time.monotonic() - cached[0] <= INSTRUCTIONS_TTL:
            return cached[1]
        try:
            text = tool_call(build_instructions)(access)
        except Exception as exc:  # noqa: BLE001 - the server must still start without a database
            text = f"{BASE_INSTRUCTIONS}\n\n(index unavailable: {exc.__class__.__name__})"
        if len(_cache) > 256:  # one entry per distinct set of visible collections
            _cache.clear()
        _cache[key] = (time.monotonic(), text)
        return text


def cached_instructions() -> str:
    """What `initialize` answers: the cached text for the connection's access, never a database read."""
    access = current_access.get()
    if access is None:
        return BASE_INSTRUCTIONS
    cached = _cache.get(_key(access))
    return cached[1] if cached else BASE_INSTRUCTIONS


@contextlib.asynccontextmanager
async def lifespan(app):
    """Entered when the server starts serving (a stdio connection): keep the description fresh."""
    if current_access.get() is not None:
        await anyio.to_thread.run_sync(refresh_instructions)
    yield None


def install_live_instructions(server) -> None:
    """Make the low-level server read the description of the index its caller may see."""
    low = server._lowlevel_server  # noqa: SLF001 - the SDK reads `instructions` at initialize time
    base = type(low)
    low.__class__ = type(
        "PmdLowLevelServer",
        (base,),
        {
            "instructions": property(lambda self: cached_instructions(), lambda self, value: None),
        },
    )
