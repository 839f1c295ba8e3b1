"""Edits of a note's text an agent asks for by meaning (a section, a frontmatter field, a text),
so it never has to send the whole note back: pure functions of the text, applied by
indexing.services.notes under the note's lock."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from indexing import errors

OPERATIONS = ("replace_section", "append", "prepend", "set_field", "remove_field", "replace_text")
_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*(?:[ \t]#+[ \t]*)?$")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_YAML_FRONTMATTER_RE = re.compile(r"\A---[ \t]*\r?\n(.*?)(?:\r?\n)?^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S | re.M)


@dataclass(frozen=True)
class NoteEdit:
    """One edit: `operation` (one of OPERATIONS) and what it needs."""

    operation: str
    heading: str = ""  # replace_section; append/prepend under it when given
    content: str = ""  # replace_section, append, prepend
    field: str = ""  # set_field, remove_field
    value: object = None  # set_field: any JSON value
    old_text: str = ""  # replace_text
    new_text: str = ""
    expected_count: int = 1


def edit_apply(text: str, edit: NoteEdit) -> str:
    """`text` with `edit` applied; NoteEditRefused when it cannot be applied as asked."""
    if edit.operation not in OPERATIONS:
        raise errors.NoteEditRefused(f"unknown operation '{edit.operation}': use one of {', '.join(OPERATIONS)}")
    return globals()[f"_{edit.operation}"](text, edit)


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _body_start(lines: list[str]) -> int:
    """The index of the first line after the frontmatter (0 without one)."""
    match = _YAML_FRONTMATTER_RE.match("".join(lines))
    if not match:
        return 0
    return len(_lines(match.group(0)))


def _headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """(line index, level, text) of the ATX headings outside fenced code and frontmatter."""
    found, fence = [], ""
    for i in range(_body_start(lines), len(lines)):
        line = lines[i].rstrip("\r\n")
        opening = _FENCE_RE.match(line)
        if fence:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = ""
            continue
        if opening:
            fence = opening.group(1)
            continue
        heading = _HEADING_RE.match(line)
        if heading:
            found.append((i, len(heading.group(1)), heading.group(2).strip()))
    return found


def _section(lines: list[str], heading: str) -> tuple[int, int]:
    """(first line after the heading, first line after its section) of the one heading named so."""
    wanted = heading.strip().lstrip("#").strip()
    headings = _headings(lines)
    matches = [h for h in headings if h[2] == wanted]
    if not matches:
        near = [h[2] for h in headings if h[2].lower() == wanted.lower() or wanted.lower() in h[2].lower()]
        raise errors.NoteEditRefused(f"the note has no heading '{wanted}'", near[:5])
    if len(matches) > 1:
        raise errors.NoteEditRefused(f"the note has {len(matches)} headings '{wanted}': edit it with replace_text")
    index, level, _ = matches[0]
    end = next((i for i, lv, _ in headings if i > index and lv <= level), len(lines))
    return index + 1, end


def _block(content: str) -> str:
    return content if content.endswith("\n") or not content else content + "\n"


def _ensure_newline(lines: list[str], at: int) -> None:
    """The line before `at` ends with a newline, so what is inserted starts on its own line."""
    if at > 0 and not lines[at - 1].endswith("\n"):
        lines[at - 1] += "\n"


def _replace_section(text: str, edit: NoteEdit) -> str:
    lines = _lines(text)
    start, end = _section(lines, edit.heading)
    _ensure_newline(lines, start)
    body = "\n" + _block(edit.content) if edit.content.strip() else ""  # a blank line after the heading
    if end < len(lines) and body and not body.endswith("\n\n"):
        body += "\n"  # and one before the next heading
    return "".join(lines[:start] + [body] + lines[end:])


def _append(text: str, edit: NoteEdit) -> str:
    lines = _lines(text)
    if edit.heading:
        _, end = _section(lines, edit.heading)
        while end > 0 and not lines[end - 1].strip() and end < len(lines):
            end -= 1  # before the blank lines that part it from the next heading
    else:
        end = len(lines)
    _ensure_newline(lines, end)
    return "".join(lines[:end] + [_block(edit.content)] + lines[end:])


def _prepend(text: str, edit: NoteEdit) -> str:
    lines = _lines(text)
    start = _section(lines, edit.heading)[0] if edit.heading else _body_start(lines)
    _ensure_newline(lines, start)
    return "".join(lines[:start] + [_block(edit.content)] + lines[start:])


def _frontmatter(text: str) -> tuple[dict, str]:
    """(the YAML frontmatter as a mapping, the rest of the note)."""
    import yaml  # noqa: PLC0415 - read only when an edit touches frontmatter

    if text.startswith("+++"):
        raise errors.NoteEditRefused("the note's frontmatter is TOML: edit it with replace_text")
    match = _YAML_FRONTMATTER_RE.match(text)
    if not match:
        return {}, text
    try:
        data = yaml.safe_load(match.group(1)) or {}
    except yaml.YAMLError as exc:
        raise errors.NoteEditRefused(f"the note's frontmatter is not valid YAML ({exc.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise errors.NoteEditRefused("the note's frontmatter is not a mapping of fields")
    return data, text[match.end() :]


def _with_frontmatter(data: dict, rest: str) -> str:
    import yaml  # noqa: PLC0415

    if not data:
        return rest
    dumped = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)
    return f"---\n{dumped}---\n{rest}"


def _field_name(edit: NoteEdit) -> str:
    name = edit.field.strip()
    if not name:
        raise errors.NoteEditRefused(f"{edit.operation} needs the name of a field")
    return name


def _set_field(text: str, edit: NoteEdit) -> str:
    name = _field_name(edit)
    try:
        json.dumps(edit.value)
    except (TypeError, ValueError):
        raise errors.NoteEditRefused("a field's value is text, a number, true/false, a list or a mapping") from None
    data, rest = _frontmatter(text)
    data[name] = edit.value
    return _with_frontmatter(data, rest)


def _remove_field(text: str, edit: NoteEdit) -> str:
    name = _field_name(edit)
    data, rest = _frontmatter(text)
    if name not in data:
        raise errors.NoteEditRefused(f"the note's frontmatter has no field '{name}'", sorted(map(str, data))[:10])
    del data[name]
    return _with_frontmatter(data, rest)


def _replace_text(text: str, edit: NoteEdit) -> str:
    if not edit.old_text:
        raise errors.NoteEditRefused("replace_text needs the text to replace")
    found = text.count(edit.old_text)
    if found != edit.expected_count:
        raise errors.NoteEditRefused(
            f"the text to replace is found {found} time{'' if found == 1 else 's'}, "
            f"not the {edit.expected_count} expected: nothing was changed"
        )
    return text.replace(edit.old_text, edit.new_text)
