"""The `research` prompt: how to answer a question from the knowledge base with pmd's tools."""

from mcp.server import MCPServer


def register_prompts(server: MCPServer) -> None:
    """Add pmd's prompts to `server`."""

    @server.prompt(name="research", title="Research a question in the knowledge base")
    def research(question: str) -> str:
        """How to answer a question from the knowledge base with pmd's tools, citing sources."""
        return (
            f"Answer this question from the knowledge base: {question}\n\n"
            "1. Call pmd_status if you do not yet know which collections exist.\n"
            "2. Call pmd_search with the most specific keywords (names, identifiers, exact phrases).\n"
            "3. If the hits are weak, call pmd_vector_search with the question in plain words, or "
            "pmd_deep_search with an `intent` (and lex/vec/hyde `searches` if you can phrase them).\n"
            "4. Read the best hits with pmd_get (from_line near the hit's line, max_lines about 80) "
            "before relying on them; use pmd_multi_get for several short documents.\n"
            "5. Answer only from what you read, and cite each claim with its pmd:// URI and line.\n"
            "If nothing relevant is found, say so instead of guessing."
        )
