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


def _render_value(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "-"
    if isinstance(value, dict) and "model" in value and "present" in value:  # a role's model (models section)
        return str(value["model"]) + (" (missing)" if value["present"] is False else "")
    return str(value)


def cmd_status(args) -> int:
    from pmd_site.reports.status import TITLES, status_headlines, status_report

    report = status_report(internals=True, access=local_access())  # the local OS user runs the server: the full report
    if args.json:
        print_json(report)
        return 0
    console = stdout_console()
    for section, data in report.items():
        ok = data.get("ok", True)
        mark = "[green]●[/]" if ok else "[red]●[/]"
        console.print(
            f"{mark} [bold]{section}[/]"
            + (f" ({TITLES[section]})" if section in TITLES and TITLES[section].lower() != section else "")
        )
        headlines = status_headlines(section, data)
        for line in headlines:
            console.print(f"    {'[red]' if not ok else ''}{escape(line)}{'[/]' if not ok else ''}", highlight=False)
        for key, value in data.items():
            if key in {"ok", "error"} or (headlines and key in {"advice", "hybrid", "hint", "reason", "backend_from"}):
                continue
            if isinstance(value, list):
                if not value:
                    continue
                console.print(f"    {key}:")
                for item in value[:20]:
                    if isinstance(item, dict):
                        console.print(
                            "      " + "  ".join(f"{k}={escape(_render_value(v))}" for k, v in item.items()),
                            highlight=False,
                        )
                    else:
                        console.print(f"      {escape(item)}")
            elif isinstance(value, dict):
                console.print(f"    {key}: " + ", ".join(f"{k}={escape(_render_value(v))}" for k, v in value.items()))
            else:
                console.print(f"    {key}: {escape(_render_value(value))}", highlight=False)
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
