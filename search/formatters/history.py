"""Commits found in the git history (search.retrieval.history.HistoryResponse) in every format.

Options: `diff` (show each commit's diff excerpt, as `pmd history --diff`)."""

from __future__ import annotations

from search.formatters.registry import XmlWriter, as_json, csv_text, markup_line, markup_text, renders

renders("history", "json")(as_json)


def _change(f) -> str:
    return f"{f.status} {f.old_path} → {f.path}" if f.old_path else f"{f.status} {f.path}"


@renders("history", "cli")
def _cli(response, *, diff: bool = False, **_) -> str:
    """Console markup: a commit per block, its changed notes under it."""
    out = []
    for hit in response.results:
        out.append(
            f"[yellow]{hit.short}[/] [bold]{markup_text(hit.title)}[/]  [dim]{hit.date[:10]} "
            f"{markup_text(hit.author)} · {markup_text(hit.collection)} · {hit.score:.0%}[/]"
        )
        out += [f"    {markup_line(line)}" for line in hit.snippet.splitlines()]
        for f in hit.files:
            now = (
                f"  [cyan]pmd://{markup_text(hit.collection)}/{markup_text(f.path)}[/] [dim]#{f.docid}[/]"
                if f.docid
                else ""
            )
            out.append(f"    [dim]{markup_text(_change(f))}[/]{now}")
        if diff and hit.diff:
            for line in hit.diff.splitlines():
                style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
                out.append(f"    [{style}]{markup_text(line)}[/]")
        out.append("")
    return "".join(line + "\n" for line in out)


@renders("history", "files")
def _files(response, **_) -> str:
    """The changed notes that still exist, once each."""
    seen, out = set(), []
    for hit in response.results:
        for f in hit.files:
            if f.docid and (hit.collection, f.path) not in seen:
                seen.add((hit.collection, f.path))
                out.append(f"#{f.docid},pmd://{hit.collection}/{f.path}\n")
    return "".join(out)


@renders("history", "csv")
def _csv(response, *, diff: bool = False, **_) -> str:
    header = ["collection", "sha", "date", "author", "email", "score", "title", "files"] + (["diff"] if diff else [])
    return csv_text(
        [header]
        + [
            [
                hit.collection,
                hit.sha,
                hit.date,
                hit.author,
                hit.email,
                f"{hit.score:.4f}",
                hit.title,
                ";".join(f.path for f in hit.files),
            ]
            + ([hit.diff or ""] if diff else [])
            for hit in response.results
        ]
    )


@renders("history", "md")
def _md(response, *, diff: bool = False, **_) -> str:
    out = [f"# History: {response.query or '(filters)'}", ""]
    if not response.results:
        out.append("_No commits._")
    for hit in response.results:
        out += [
            f"## {hit.title or '(no message)'}",
            "",
            f"`{hit.short}` · {hit.collection} · {hit.author} <{hit.email}> · {hit.date[:10]} · score {hit.score:.2f}",
            "",
        ]
        body = hit.message.split("\n", 1)[1].strip() if "\n" in hit.message else ""
        if body:
            out += [body, ""]
        for f in hit.files:
            link = f" ([now](pmd://{hit.collection}/{f.path}) `#{f.docid}`)" if f.docid else ""
            out.append(f"- {_change(f)}{link}")
        if hit.files:
            out.append("")
        if diff and hit.diff:
            out += ["```diff", hit.diff, "```", ""]
    return "\n".join(out) + "\n"


@renders("history", "xml")
def _xml(response, *, diff: bool = False, **_) -> str:
    xml = XmlWriter()
    xml.open(0, "history", query=response.query, mode=response.mode)
    for hit in response.results:
        xml.open(
            1,
            "commit",
            collection=hit.collection,
            sha=hit.sha,
            date=hit.date,
            author=hit.author,
            email=hit.email,
            score=f"{hit.score:.4f}",
        )
        xml.element(2, "title", hit.title)
        xml.element(2, "message", hit.message)
        for f in hit.files:
            attrs = {"status": f.status, "path": f.path}
            if f.old_path:
                attrs["old_path"] = f.old_path
            if f.docid:
                attrs |= {"docid": "#" + f.docid, "uri": f"pmd://{hit.collection}/{f.path}"}
            xml.element(2, "file", **attrs)
        if diff and hit.diff is not None:
            xml.element(2, "diff", hit.diff, truncated=str(hit.diff_truncated).lower())
        xml.close(1, "commit")
    xml.close(0, "history")
    return xml.text()


@renders("history", "mcp")
def _mcp(result, **_) -> str:
    """`result`: pmd_search_history's HistoryBrief."""
    lines = []
    for hit in result.results:
        lines.append(f"{hit.sha[:10]} {hit.date[:10]} {hit.author} ({hit.score:.2f}) [{hit.collection}] {hit.title}")
        for f in hit.files:
            now = f" (now #{f.docid})" if f.docid else ""
            lines.append(f"  {f.status} {f.old_path + ' -> ' if f.old_path else ''}{f.path}{now}")
        if hit.diff:
            lines.append("  " + hit.diff[:2000].replace("\n", "\n  "))
    if not lines:
        lines.append(f"no commits for {result.query!r}")
    lines += [f"warning: {w}" for w in result.warnings]
    return "\n".join(lines)
