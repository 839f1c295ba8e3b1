"""An answer of the notes (search.pipeline.answer.AskAnswer) for the CLI, JSON, MCP, and as the
server-sent events the streaming faces (POST /api/ask with stream, the web Ask mode) send."""

from __future__ import annotations

import json

from search.formatters.registry import as_json, markup_text, renders

renders("ask", "json")(as_json)


def _sources(answer) -> list[str]:
    lines = []
    if answer.nearest:
        lines.append("nearest notes:")
        lines += [f"  {n['uri']}:{n['line']} ({n['score']:.2f}) {n['title']}" for n in answer.nearest]
    elif answer.passages:
        lines.append("sources:")
        lines += [
            f"  [{p.number}] {p.source} {p.title}" + ("" if p.number in answer.cited else " (not cited)")
            for p in answer.passages
        ]
    lines += [f"warning: {f['message']}" for f in answer.flags if f["code"] != "uncited"]
    return lines


def _stats(answer) -> str:
    t = answer.timings
    first = f"first token {t['first_token'] / 1000:.2f} s, " if "first_token" in t else ""
    model = f"{answer.model}, {answer.tokens_in} tokens in / {answer.tokens_out} out, " if answer.model else ""
    return f"{model}{first}total {t.get('total', 0) / 1000:.2f} s ({answer.state})"


@renders("ask", "cli")
def _cli(answer, *, with_text: bool = True, **_) -> str:
    """Console markup: the answer (unless it was streamed already), its sources, the cost."""
    out = [markup_text(answer.text), ""] if with_text else [""]
    out += [markup_text(line) for line in _sources(answer)]
    out.append(f"[dim]{markup_text(_stats(answer))}[/]")
    return "".join(line + "\n" for line in out)


@renders("ask", "mcp")
def _mcp(answer, **_) -> str:
    """What an agent reads: the checked answer, then the sources its [n] stand for."""
    return "\n".join([answer.text, "", *_sources(answer), _stats(answer)])


def sse_event(kind: str, data) -> str:
    """One server-sent event: `event: kind`, its data as one JSON line."""
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def ask_sse(events, *, done=None):
    """The answer's events as server-sent events: `passages`, `token` ({text}), `done` (the whole
    answer, or what `done(answer)` makes of it: the web adds its rendered HTML)."""
    for event in events:
        if event.kind == "passages":
            yield sse_event("passages", [p.as_dict(text=False) for p in event.passages])
        elif event.kind == "token":
            yield sse_event("token", {"text": event.text})
        else:
            yield sse_event("done", done(event.answer) if done else event.answer.as_dict())
