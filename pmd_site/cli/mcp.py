"""`pmd mcp`: the MCP server over stdio for local agents (Claude Desktop, Claude Code, …).

Nothing but the protocol goes to stdout; logs and errors go to stderr. The same server is
served over Streamable HTTP at /mcp by `pmd serve` / `pmd up` (with a bearer token).
"""

from __future__ import annotations


def register(sub) -> None:
    mcp = sub.add_parser("mcp", help="serve the MCP tools over stdio (for local agents)")
    # A client's config often lacks the PMD_HOME `pmd up` was given: it says so instead of starting
    # a new, empty index at the default place (pmd_site.cli.only_reads).
    mcp.set_defaults(func=cmd_mcp)


def cmd_mcp(args) -> int:
    from indexing.access import Access
    from pmd_site.mcp.instructions import current_access
    from pmd_site.mcp.server import get_server, refresh_instructions

    current_access.set(Access.local_user())  # on stdio the agent acts as the local OS user
    refresh_instructions(force=True)
    get_server().run("stdio")
    return 0
