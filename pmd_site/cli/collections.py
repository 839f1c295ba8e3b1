"""`pmd collection …` and `pmd update`."""

from __future__ import annotations

from indexing.errors import CommandError
from pmd_site.cli.output import (
    FOLLOW_JOB,
    escape,
    local_access,
    print_json,
    progress_bar,
    stdout_console,
    warn,
)


def register(sub) -> None:
    coll = sub.add_parser("collection", help="manage collections (folders of markdown)")
    csub = coll.add_subparsers(dest="collection_command", metavar="ACTION", required=True)

    add = csub.add_parser("add", help="add a folder as a collection and index it")
    add.add_argument("path")
    add.add_argument("--name", help="collection name (default: the folder's name)")
    add.add_argument("--mask", help="glob of files to index (default: **/*.md)")
    add.add_argument(
        "--formats",
        metavar="LIST",
        help="formats to read besides markdown, instead of --mask: pdf,docx,pptx,xlsx,html,epub,text",
    )
    add.add_argument("--ignore", action="append", default=[], metavar="GLOB", help="ignore pattern (repeatable)")
    add.add_argument(
        "--language",
        help="language of the notes, for stemming and stop words: auto (the default: "
        "detected from the notes), en, de, fr, es, ru, zh, ja, ... or none",
    )
    add.add_argument(
        "--config",
        dest="text_search_config",
        help="expert form of --language: a PostgreSQL text search configuration (english, simple, ...)",
    )
    add.add_argument(
        "--title-from",
        choices=["heading", "filename"],
        help="where titles come from: the frontmatter title or first level-1 heading, or the file "
        "name (default: filename for an Obsidian vault, a folder holding .obsidian/; else heading)",
    )
    add.add_argument(
        "--transclude",
        action="store_true",
        help="a note that embeds another (![[Note#Section]]) is found by the embedded words too",
    )
    add.add_argument(
        "--writable",
        action="store_true",
        help="agents and members chosen as writers may write notes in it (default: read-only)",
    )
    add.add_argument("--no-index", action="store_true", help="register only; index later with `pmd update`")
    add.add_argument("--json", action="store_true")
    add.set_defaults(func=cmd_add)

    ls = csub.add_parser("list", help="list collections")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)

    show = csub.add_parser("show", help="show one collection")
    show.add_argument("name")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_show)

    conf = csub.add_parser(
        "set", help="change how a collection is read (formats, mask, transclusion, titles); re-indexes it"
    )
    conf.add_argument("name")
    conf.add_argument(
        "--formats",
        metavar="LIST",
        help="the formats to read, instead of the mask: md,pdf,docx,pptx,xlsx,html,epub,text (markdown always)",
    )
    conf.add_argument("--mask", help="glob of files to read instead (e.g. **/*.{md,pdf})")
    conf.add_argument(
        "--transclude",
        choices=["on", "off"],
        help="on: a note that embeds another (![[Note#Section]]) is found by the embedded words too",
    )
    conf.add_argument(
        "--title-from",
        choices=["heading", "filename"],
        help="titles from the frontmatter title or first level-1 heading, or from file names "
        "(the notes are read again by this command)",
    )
    conf.add_argument(
        "--writable",
        choices=["on", "off"],
        help="on: its owner, superusers and its writers may write notes in it through pmd",
    )
    conf.add_argument(
        "--writer", action="append", metavar="USER", help="who may write notes in it (repeat; replaces the list)"
    )
    conf.add_argument(
        "--writer-group", action="append", metavar="GROUP", help="a group whose members may write notes in it (repeat)"
    )
    conf.add_argument("--no-writers", action="store_true", help="no chosen writers (only its owner and superusers)")
    conf.add_argument("--json", action="store_true")
    conf.set_defaults(func=cmd_set)

    share = csub.add_parser(
        "share",
        help="choose who sees a collection: everyone, chosen groups and people, or its owner only",
        description="Choose who sees a collection in the web UI, the API and /mcp (the CLI always sees "
        "everything). Give exactly one of --everyone, --private, or any number of --group and "
        "--user (which may be combined).",
    )
    share.add_argument("name")
    share.add_argument("--everyone", action="store_true", help="every signed-in member (the default)")
    share.add_argument("--private", action="store_true", help="its owner only (and superusers)")
    share.add_argument(
        "--group",
        action="append",
        default=[],
        dest="groups",
        metavar="GROUP",
        help="members of this group (repeatable; see `pmd group list`)",
    )
    share.add_argument(
        "--user", action="append", default=[], dest="users", metavar="USERNAME", help="this person (repeatable)"
    )
    share.add_argument("--json", action="store_true")
    share.set_defaults(func=cmd_share)

    rm = csub.add_parser("remove", aliases=["rm"], help="remove a collection from the index (files are not touched)")
    rm.add_argument("name")
    rm.set_defaults(func=cmd_remove)

    mv = csub.add_parser("rename", aliases=["mv"], help="rename a collection")
    mv.add_argument("name")
    mv.add_argument("new_name")
    mv.set_defaults(func=cmd_rename)

    upd = sub.add_parser("update", help="re-index collections (only what changed)")
    upd.add_argument("-c", "--collection", action="append", dest="collections", metavar="NAME")
    upd.add_argument("--pull", action="store_true", help="git pull collections that are git checkouts first")
    upd.add_argument("--json", action="store_true")
    upd.set_defaults(func=cmd_update)


def _print_report(report, *, console, new_only: bool = False) -> None:
    """The scan's line and its problems; `new_only`: those the last scan did not report already
    (`pmd up` at every start), the others counted in one line."""
    parts = [
        f"[green]{report.added} added[/]",
        f"{report.updated} updated",
        f"{report.unchanged} unchanged",
        f"{report.removed} removed",
    ]
    if report.reactivated:
        parts.append(f"{report.reactivated} restored")
    if report.skipped:
        parts.append(f"[yellow]{report.skipped} skipped[/]")
    errors = report.errors
    parts.append(f"[red]{errors} errors[/]" if errors else "0 errors")
    console.print(f"[bold]{escape(report.collection)}[/]: " + ", ".join(parts) + f" [dim]({report.elapsed:.2f}s)[/]")
    not_read = report.not_read_line()
    if not_read:  # nothing skipped in silence
        formats = ",".join(report.formats_to_include)
        warn(f"{not_read}: include them with `pmd collection set {report.collection} --formats {formats}`")
    issues = [i for i in report.issues if not i.known] if new_only else report.issues
    for issue in issues[:20]:
        warn(str(issue))
    if len(issues) > 20:
        warn(f"… and {len(issues) - 20} more (see `pmd collection show {report.collection}`)")
    if len(issues) < len(report.issues):
        known = len(report.issues) - len(issues)
        warn(f"{known} problem(s) reported before, unchanged (see `pmd collection show {report.collection}`)")


def _print_history(history, *, console) -> None:
    """The git history's line of `pmd update` (nothing for a folder outside any repository)."""
    if history is None or (history.state == "not_repository" and not history.removed):
        return
    if history.state == "indexed":
        console.print(
            f"  history: [green]{history.added} new commits[/], {history.removed} dropped, "
            f"{history.total} indexed [dim]({history.elapsed:.2f}s)[/]"
        )
    else:
        console.print(f"  history: {history.state}, {history.removed} dropped", highlight=False)
    if history.message:
        warn(f"{history.collection} history: {history.message}")


def cmd_add(args) -> int:
    from pathlib import Path

    from indexing.services.refresh import collection_add

    console = stdout_console()
    label = f"indexing {args.name or Path(args.path).expanduser().name}"
    with progress_bar(label, enabled=not args.json and not args.no_index) as progress:
        added = collection_add(
            path=args.path,
            name=args.name,
            mask=args.mask,
            formats=(args.formats or "").split(",") if args.formats else None,
            ignore_patterns=args.ignore,
            text_search_config=args.text_search_config,
            title_from=args.title_from,
            language=args.language,
            transclude=args.transclude,
            writable=args.writable,
            index="no" if args.no_index else "now",
            progress=progress,
            access=local_access(),
        )
    collection = added.collection
    if not args.json:
        console.print(
            f"language: {escape(collection.language_choice.label)} "
            f"[dim](text search configuration {escape(collection.text_search_config)})[/]"
        )
    if args.no_index:
        console.print(
            f"added collection [bold]{escape(collection.name)}[/] → {escape(collection.root_path)} (not indexed yet)"
        )
        return 0
    refreshed = added.refreshed
    if refreshed.problem:
        raise CommandError(refreshed.problem)
    if args.json:
        print_json(refreshed.report.as_dict())
    else:
        console.print(
            f"added collection [bold]{escape(collection.name)}[/] → {escape(collection.root_path)} "
            f"(mask {escape(collection.mask)}, titles from {collection.title_from})"
        )
        _print_report(refreshed.report, console=console)
        print_embedding(refreshed.report.changed_document_ids, added.refresh.embedding, console=console)
        for outer in added.inside:
            console.print(
                f"[yellow]inside collection {escape(outer)}: its notes are indexed here now, not in "
                f"{escape(outer)} as well (a note is indexed once)[/]"
            )
    return 0


def print_embedding(changed, job, *, console) -> None:
    """Say what became of the embedding request a scan made."""
    if job is not None:
        console.print(f"[dim]embedding of what changed is queued; {escape(FOLLOW_JOB)}[/]")
    elif changed:
        console.print("[dim]no worker is running: `pmd embed` computes the vectors (or `pmd up`)[/]")


def cmd_list(args) -> int:
    from indexing.selectors import collections_overview

    rows = [r.as_dict() for r in collections_overview(access=local_access())]
    if args.json:
        print_json(rows)
        return 0
    console = stdout_console()
    if not rows:
        console.print("no collections yet: `pmd collection add PATH`")
        return 0
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, header_style="bold")
    for col in ("name", "documents", "mask", "path", "last indexed", "visible to"):
        table.add_column(col)
    for r in rows:
        when = r["last_indexed_at"].strftime("%Y-%m-%d %H:%M") if r["last_indexed_at"] else "never"
        table.add_row(
            *(Text(cell) for cell in (r["name"], str(r["documents"]), r["mask"], r["path"], when, visible_to(r)))
        )
    print_table(table, console=console)
    return 0


def print_table(table, *, console) -> None:
    """A table on a terminal fits its width; piped, each row stays on one line (for grep and cut)."""
    if not console.is_terminal:
        console.width = 10_000
    console.print(table)


def visible_to(row: dict) -> str:
    """Who sees a collection, compactly (`collection list`): everyone, private or the chosen ones."""
    if row["visibility"] == "everyone":
        return "everyone"
    if row["visibility"] == "private":
        return "private"
    parts = []
    if row["shared_groups"]:
        parts.append("groups: " + ", ".join(row["shared_groups"]))
    if row["shared_users"]:
        parts.append("people: " + ", ".join(row["shared_users"]))
    return "; ".join(parts) or "no one chosen (owner only)"


def sharing_text(row: dict) -> str:
    """Who sees a collection, as a phrase (`collection show`, `collection share`)."""
    if row["visibility"] == "everyone":
        return "everyone"
    if row["visibility"] == "private":
        return "private"
    parts = []
    if row["shared_groups"]:
        parts.append(("group " if len(row["shared_groups"]) == 1 else "groups ") + ", ".join(row["shared_groups"]))
    if row["shared_users"]:
        parts.append(("person " if len(row["shared_users"]) == 1 else "people ") + ", ".join(row["shared_users"]))
    return "shared with " + (" and ".join(parts) or "no one chosen (owner only)")


def owner_text(row: dict) -> str:
    if row["owner"]:
        return row["owner"]
    if row["visibility"] == "private":
        return "- (no owner: only superusers and the CLI see it)"
    return "-"


def cmd_share(args) -> int:
    from indexing.selectors import collection_sharing
    from indexing.services.sharing import collection_share

    chosen = [
        flag
        for flag, on in (
            ("--everyone", args.everyone),
            ("--private", args.private),
            ("--group/--user", bool(args.groups or args.users)),
        )
        if on
    ]
    if len(chosen) != 1:
        raise CommandError(
            "give exactly one of --everyone, --private, or --group/--user (repeatable, combinable)"
            + (f"; got {' and '.join(chosen)}" if chosen else "")
        )
    visibility = "everyone" if args.everyone else "private" if args.private else "shared"
    shared = collection_share(
        name=args.name, visibility=visibility, users=args.users, groups=args.groups, access=local_access()
    )
    row = {"name": shared.collection.name, **collection_sharing(shared.collection)}
    if args.json:
        print_json(row)
        return 0
    owner = (
        f"owner: {row['owner']}"
        if row["owner"]
        else "no owner: only superusers and the CLI see it"
        if visibility == "private"
        else ""
    )
    stdout_console().print(
        f"[bold]{escape(row['name'])}[/]: {escape(sharing_text(row))}" + (f" ({escape(owner)})" if owner else "")
    )
    return 0


def cmd_show(args) -> int:
    from indexing.language import language_label
    from indexing.problems import counts_text, problem_counts, problems_in_order
    from indexing.selectors import collection_detail
    from pmd_site.reports.readable import history_text, on_off, value_text

    detail = collection_detail(name=args.name, access=local_access())
    contexts = detail.contexts
    data = detail.as_dict() | {
        "ignore": detail.ignore,
        "text_search_config": detail.text_search_config,
        "contexts": contexts,
        "problems": detail.problem_list,
        "history": detail.history,
    }
    if args.json:
        print_json(data)
        return 0
    console = stdout_console()
    for key, value in (
        ("name", data["name"]),
        ("path", data["path"]),
        ("mask", data["mask"]),
        ("titles from", data["title_from"]),
        ("transclude", on_off(data["transclude"])),
        ("notes", f"{data['documents']:,}"),
        ("removed notes kept", f"{data['inactive']:,}"),
        (
            "last indexed",
            value_text("last_indexed_at", data["last_indexed_at"]) if data["last_indexed_at"] else "never",
        ),
    ):
        console.print(f"[bold]{key}[/]: {escape(str(value))}", highlight=False)

    console.print(f"[bold]visibility[/]: {escape(sharing_text(data))}")
    console.print(f"[bold]owner[/]: {escape(owner_text(data))}")
    console.print(f"[bold]ignore[/]: {escape(', '.join(detail.ignore) or '-')}")
    console.print(
        f"[bold]language[/]: {escape(language_label(detail.text_search_config))} "
        f"(text search config {escape(detail.text_search_config)})"
    )
    console.print(f"[bold]history[/]: {escape(history_text(data['history']))}", highlight=False)
    for ctx in contexts:
        uri = f"pmd://{detail.name}/{ctx['path_prefix']}"
        console.print(f"[bold]context[/] {escape(uri)}: {escape(ctx['text'])}")
    # by kind, errors first, each kind counted (indexing.problems): an error is not lost among links
    access = local_access()
    counts = problem_counts(access, collection_id=detail.collection.id)
    console.print(f"[bold]problems[/]: {escape(counts_text(counts))}", highlight=False)
    for p in problems_in_order(access, collection_id=detail.collection.id, per_kind=None):
        colour = "red" if p["kind"] == "error" else "yellow"
        console.print(f"[{colour}]{p['severity']}[/] {escape(p['path'])}: {escape(p['message'])}", highlight=False)
    return 0


def cmd_set(args) -> int:
    from indexing.selectors import collection_detail
    from indexing.services.refresh import collection_set
    from indexing.services.sharing import collection_writers

    writers = args.writable is not None or args.writer or args.writer_group or args.no_writers
    configure = any(v is not None for v in (args.transclude, args.title_from, args.formats, args.mask))
    if not configure and not writers:
        raise CommandError(
            "nothing to change: give --formats LIST or --mask GLOB, --transclude on|off, "
            "--title-from heading|filename, --writable on|off or --writer/--writer-group/--no-writers"
        )
    console = stdout_console()
    if writers:
        collection_writers(
            name=args.name,
            access=local_access(),
            writable=None if args.writable is None else args.writable == "on",
            users=[] if args.no_writers else args.writer,
            groups=[] if args.no_writers else args.writer_group,
        )
    with progress_bar(f"indexing {args.name}", enabled=not args.json) as bar:
        done = collection_set(
            name=args.name,
            access=local_access(),
            transclude=None if args.transclude is None else args.transclude == "on",
            title_from=args.title_from,
            formats=None if args.formats is None else args.formats.split(","),
            mask=args.mask,
            progress=bar,
        )
    row = collection_detail(name=done.collection.name, access=local_access()).as_dict()
    if args.json:
        print_json(
            row | ({"report": done.refreshed.report.as_dict()} if done.refreshed and done.refreshed.report else {})
        )
        return 0
    console.print(
        f"[bold]{escape(row['name'])}[/]: reads {escape(row['mask'])}, titles from {row['title_from']}, "
        f"transclusion {'on' if row['transclude'] else 'off'}, "
        + (
            "writable by its owner, superusers"
            + "".join(f", {w}" for w in row["writer_users"])
            + "".join(f", group {g}" for g in row["writer_groups"])
            if row["writable"]
            else "read-only"
        )
    )
    if done.refreshed and done.refreshed.report:
        _print_report(done.refreshed.report, console=console)
    return 0


def cmd_remove(args) -> int:
    from indexing.services.collections import collection_remove

    count = collection_remove(name=args.name, access=local_access())
    stdout_console().print(f"removed collection [bold]{escape(args.name)}[/] ({count} documents; files untouched)")
    return 0


def cmd_rename(args) -> int:
    from indexing.services.collections import collection_rename

    collection_rename(name=args.name, new_name=args.new_name, access=local_access())
    stdout_console().print(f"renamed [bold]{escape(args.name)}[/] → [bold]{escape(args.new_name)}[/]")
    return 0


def cmd_update(args) -> int:
    from contextlib import ExitStack

    from indexing.services.refresh import collections_refresh

    console = stdout_console()
    with ExitStack() as stack:

        def progress_for(collection):
            return stack.enter_context(progress_bar(f"indexing {collection.name}", enabled=not args.json))

        refreshed_all = collections_refresh(
            names=args.collections, pull=args.pull, progress_for=progress_for, access=local_access()
        )
    failed = 0
    out = []
    for refreshed in refreshed_all.collections:
        report, pulled, problem = refreshed.report, refreshed.pulled, refreshed.problem
        if pulled and pulled.ran and not args.json:
            style = "green" if pulled.ok else "red"
            last = pulled.output.splitlines()[-1] if pulled.output else "ok"
            console.print(f"[{style}]git pull[/] {escape(pulled.collection)}: {escape(last)}")
        if problem:
            failed += 1
            warn(problem)
            out.append({"error": problem})
            continue
        history = refreshed.history
        if args.json:
            out.append(
                report.as_dict()
                | ({"pull": pulled.__dict__} if pulled else {})
                | ({"history": history.as_dict()} if history else {})
            )
        else:
            _print_report(report, console=console)
            _print_history(history, console=console)
    if args.json:
        print_json(out)
    elif not refreshed_all.collections:
        console.print("no collections yet: `pmd collection add PATH`")
    else:
        print_embedding(refreshed_all.changed, refreshed_all.embedding, console=console)
    return 1 if failed else 0
