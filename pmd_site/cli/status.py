"""`pmd status` and `pmd cleanup`."""

from __future__ import annotations

from pmd_site.cli.output import escape, local_access, print_json, stdout_console


def register(sub) -> None:
    st = sub.add_parser("status", help="database, index, workers, models and problems at a glance")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=cmd_status)
    cl = sub.add_parser("cleanup", help="drop inactive documents, orphaned content and the LLM cache; vacuum")
    cl.add_argument("--keep-llm-cache", action="store_true")
    cl.add_argument("--json", action="store_true")
    cl.set_defaults(func=cmd_cleanup)


def cmd_status(args) -> int:
    from pmd_site.reports.readable import status_lines
    from pmd_site.reports.status import status_report

    report = status_report(internals=True, access=local_access())  # the local OS user runs the server: the full report
    if args.json:
        print_json(report)
        return 0
    console = stdout_console()
    # the web status page's words (pmd_site.reports.readable): values in words, tables as rows
    dots = {"ok": "[green]●[/]", "warn": "[yellow]●[/]", "bad": "[red]●[/]"}
    for state, line in status_lines(report):
        console.print((f"{dots[state]} [bold]{escape(line)}[/]" if state else escape(line)), highlight=False)
    return 0


def cmd_cleanup(args) -> int:
    from indexing.services.maintenance import index_cleanup

    report = index_cleanup(clear_llm_cache=not args.keep_llm_cache)
    if args.json:
        print_json(report.as_dict())
        return 0
    stdout_console().print(
        f"removed {report.inactive_documents} inactive documents, {report.orphaned_content} orphaned contents, "
        f"{report.llm_cache_entries} LLM cache entries, {report.unused_extractions} unused converted texts; vacuumed"
    )
    return 0
