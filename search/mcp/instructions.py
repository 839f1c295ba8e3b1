"""The server's instructions: how to use the tools, plus what is in the index right now.

The description of the live index (collections, document counts, contexts) is cached for
INSTRUCTIONS_TTL seconds, refreshed when a connection starts (the lifespan) and after
pmd_status, and read by the low-level server at initialize time.
"""

import contextlib
import threading
import time

import anyio

from indexing.selectors import collections_overview, context_list
from search.mcp.errors import tool_call

INSTRUCTIONS_TTL = 30.0  # seconds a description of the index stays fresh

BASE_INSTRUCTIONS = """\
pmd searches a markdown knowledge base. Start with pmd_search (fast keyword/BM25: exact terms,
names, identifiers); use pmd_vector_search for meaning when words differ; use pmd_deep_search
for hard questions (query expansion + keyword + vector + re-ranking; slower). Results give a
docid (#abc123), a pmd:// URI and a line: read the document with pmd_get (use from_line and
max_lines to read around the hit) or several at once with pmd_multi_get. Documents are also
resources at pmd://{collection}/{path} (optionally ?start=LINE&lines=N)."""

_instructions = {"text": "", "at": 0.0}
_instructions_lock = threading.Lock()


def build_instructions() -> str:
    """The base text plus what is in the index right now (collections, counts, contexts)."""
    lines = [BASE_INSTRUCTIONS, "", "Collections:"]
    overview = sorted(collections_overview(), key=lambda r: r["name"])
    contexts = context_list()
    for row in overview:
        lines.append(f"- pmd://{row['name']}/ ({row['documents']} documents)")
        for c in contexts:
            if c.collection_id == row["collection"].id:
                lines.append(f"    {c.target}: {c.text}")
    if not overview:
        lines.append("- (none yet: the index is empty)")
    general = [c for c in contexts if c.collection_id is None]
    if general:
        lines += ["", "About this knowledge base:"] + [f"- {c.text}" for c in general]
    return "\n".join(lines)


def refresh_instructions(*, force: bool = False) -> str:
    """Rebuild the cached instructions when stale (sync; call it from a thread)."""
    with _instructions_lock:
        if force or time.monotonic() - _instructions["at"] > INSTRUCTIONS_TTL or not _instructions["text"]:
            try:
                _instructions["text"] = tool_call(build_instructions)()
            except Exception as exc:  # noqa: BLE001 - the server must still start without a database
                _instructions["text"] = f"{BASE_INSTRUCTIONS}\n\n(index unavailable: {exc.__class__.__name__})"
            _instructions["at"] = time.monotonic()
        return _instructions["text"]


@contextlib.asynccontextmanager
async def lifespan(app):
    """Entered when a connection (stdio) or a stateless HTTP request starts: keep the description fresh."""
    if time.monotonic() - _instructions["at"] > INSTRUCTIONS_TTL:
        await anyio.to_thread.run_sync(refresh_instructions)
    yield None


def install_live_instructions(server) -> None:
    """Make the low-level server read the cached, periodically rebuilt description of the index."""
    low = server._lowlevel_server  # noqa: SLF001 - the SDK reads `instructions` at initialize time
    base = type(low)
    low.__class__ = type("PmdLowLevelServer", (base,), {
        "instructions": property(lambda self: _instructions["text"] or BASE_INSTRUCTIONS, lambda self, value: None),
    })
