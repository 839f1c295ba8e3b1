"""What every group of tools shares: the annotation of a tool that only reads, and the shape of a
tool's answer (structured content for programs, compact text for the model)."""

from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


def tool_result(model: BaseModel, text: str) -> CallToolResult:
    """Structured content for programs, compact text for the model."""
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=model.model_dump(mode="json")
    )
