"""`pmd backup [FILE]` and `pmd restore FILE`: the index's database with PostgreSQL's own tools
(pmd_site/runtime/backup.py holds the logic)."""

from __future__ import annotations

from pathlib import Path

from pmd_site.cli.output import escape, print_json, stdout_console


def register(sub) -> None:
    backup = sub.add_parser(
        "backup", help="write the index's database to a file (pg_dump's custom format; not the notes themselves)"
    )
    backup.add_argument("file", nargs="?", help="the new file (default: pmd-INDEX-DATE-TIME.dump here)")
    backup.add_argument("--json", action="store_true")
    backup.set_defaults(func=cmd_backup, existing_index_only=True)
    restore = sub.add_parser(
        "restore", help="replace the index's database with a backup (refused while pmd runs on it)"
    )
    restore.add_argument("file", help="a file `pmd backup` wrote")
    restore.add_argument("--json", action="store_true")
    restore.set_defaults(func=cmd_restore)


def _print_counts(console, counts: dict[str, int]) -> None:
    console.print("  " + ", ".join(f"{label}: {count}" for label, count in counts.items()), highlight=False)


def _print_not_included(console, not_included) -> None:
    console.print("not in the backup:")
    for line in not_included:
        console.print(f"  - {escape(line)}", highlight=False)


def cmd_backup(args) -> int:
    from pmd_site.reports.status import size
    from pmd_site.runtime.backup import backup_database, default_backup_name

    report = backup_database(Path(args.file or default_backup_name()))
    if args.json:
        print_json(
            {
                "file": str(report.file),
                "bytes": report.size,
                "entries": report.entries,
                "counts": report.counts,
                "not_included": list(report.not_included),
            }
        )
        return 0
    console = stdout_console()
    console.print(
        f"backed up to {escape(str(report.file))} ({size(report.size)}, {report.entries} entries, checked):",
        highlight=False,
    )
    _print_counts(console, report.counts)
    _print_not_included(console, report.not_included)
    console.print(f"restore it with: pmd restore {escape(str(report.file))}", highlight=False)
    return 0


def cmd_restore(args) -> int:
    from pmd_site.runtime.backup import restore_database

    report = restore_database(Path(args.file))
    if args.json:
        print_json(
            {
                "file": str(report.file),
                "entries": report.entries,
                "counts": report.counts,
                "migrated": report.migrated,
                "not_included": list(report.not_included),
            }
        )
        return 0
    console = stdout_console()
    console.print(
        f"restored {escape(str(report.file))} ({report.entries} entries); the index now holds:", highlight=False
    )
    _print_counts(console, report.counts)
    if report.migrated:
        console.print("  migrated forward to this version of pmd")
    _print_not_included(console, report.not_included)
    console.print("the notes' folders must be where the collections say (pmd collection list); start pmd again")
    return 0
