"""`pmd embed` and `pmd models list|pull`: the embedding side of the CLI (`vsearch` is in pmd_site/cli/search.py)."""

from __future__ import annotations

import itertools
import time

from indexing.errors import CommandError
from pmd_site.cli.output import FOLLOW_JOB, escape, print_json, progress_bar, stdout_console, warn


def register(sub) -> None:
    embed = sub.add_parser("embed", help="compute missing embeddings (vector search needs them)")
    embed.add_argument("-f", "--force", action="store_true", help="re-embed everything, not only what is missing")
    embed.add_argument(
        "-c",
        "--collection",
        action="append",
        dest="collections",
        default=[],
        metavar="NAME",
        help="only this collection (repeatable)",
    )
    wait = embed.add_mutually_exclusive_group()
    wait.add_argument(
        "--wait", dest="wait", action="store_true", default=True, help="follow the work until it is done (default)"
    )
    wait.add_argument("--no-wait", dest="wait", action="store_false", help="queue it for a worker and return at once")
    embed.add_argument(
        "--yes",
        action="store_true",
        help="confirm embedding with another model or chunking than the index's vectors (replaces them)",
    )
    embed.add_argument("--json", action="store_true")
    embed.set_defaults(func=cmd_embed)

    from pmd_site.cli.search import register_vsearch

    register_vsearch(sub)  # lives with `search`; registered here to keep its place in `pmd --help`

    models = sub.add_parser("models", help="list or pull the LLM backend's models")
    msub = models.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    ls = msub.add_parser("list", help="models on the server, and which ones pmd is configured to use")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_models_list, needs_db=False)
    pull = msub.add_parser("pull", help="download models (default: the configured ones that are missing)")
    pull.add_argument("models", nargs="*", metavar="MODEL")
    pull.set_defaults(func=cmd_models_pull, needs_db=False)


# --- embed --------------------------------------------------------------------------------


def _summary(result: dict) -> str:
    if not result.get("pending_before"):
        return f"nothing to embed: everything is up to date ({result.get('model')}, {result.get('dims')}d)"
    text = (
        f"embedded {result['chunks']} chunks from {result['contents']} documents with "
        f"{result['model']} ({result['dims']}d) in {result['elapsed']:.1f}s "
        f"({result['chunks_per_second']:.1f} chunks/s)"
    )
    if result.get("index_built"):
        text += "; built the HNSW index"
    if result.get("dropped_fingerprints"):
        text += f"; removed old vectors of {', '.join(result['dropped_fingerprints'])}"
    return text


def cmd_embed(args) -> int:
    from indexing.models import Job
    from indexing.services.background import embedding_request_here
    from indexing.services.collections import collection_get
    from indexing.services.embedding import embed_pending

    collections = [collection_get(name) for name in args.collections]
    names = [c.name for c in collections] or None
    console = stdout_console()
    _confirm_replacing(args)
    from indexing.services.model_server import model_server_problem

    problem = model_server_problem()  # seconds at most: never a silent wait for a server that is down
    if problem is not None:
        if args.wait:
            raise problem
        warn(f"{problem.message} (queued: it runs once the server answers)")
    job, queued = embedding_request_here(
        collections=names, force=args.force, collection=collections[0] if len(collections) == 1 else None
    )
    if queued:
        if not args.wait:
            if args.json:
                print_json({"job": str(job.pk), "state": "queued"})
            else:
                console.print(f"embedding queued; {FOLLOW_JOB}", markup=False)
            return 0
        job = _follow(job, json_output=args.json)
        if job.state == Job.State.FAILED:
            raise CommandError(job.message or "embedding failed")
        result = job.result
    else:
        if not args.wait:
            warn("no worker is running: embedding in this process instead")
        with progress_bar("embedding", enabled=not args.json) as progress:
            report = embed_pending(collections=names, force=args.force, job=job, progress=progress)
        result = report.as_dict()
    if args.json:
        print_json(result)
    else:
        console.print(_summary(result), markup=False)  # model names may be folder paths
    return 0


def _confirm_replacing(args) -> None:
    """Embedding with another setup than the index's vectors replaces them all: say so, and ask (or --yes)."""
    import sys

    from indexing.errors import ReplacesVectors
    from indexing.services.embedding import embedding_status

    status = embedding_status()
    if not status["mismatch"] or args.yes:
        return
    held = ", ".join(sorted({f"{o['model']} ({o['chunks']} chunks)" for o in status["stale_fingerprints"]}))
    question = (
        f"embedding with {status['model']} ({status['chunking']}) replaces the index's vectors of {held}: "
        "every note and commit is embedded again"
    )
    if status.get("hint"):
        question += f"; {status['hint']}"
    if args.json or not sys.stdin.isatty():
        raise ReplacesVectors(question + " (confirm with --yes)")
    print(question)
    if input("embed everything again? [y/N] ").strip().lower() not in {"y", "yes"}:
        raise ReplacesVectors("nothing embedded")


def _follow(job, *, json_output: bool):
    """Show a queued job's progress until it finishes."""
    from indexing.models import Job
    from indexing.services.jobs import jobs_recover

    with progress_bar("embedding", enabled=not json_output) as progress:
        for turn in itertools.count():
            if turn % 10 == 0:
                jobs_recover()  # its worker may have died: then it fails instead of being followed forever
            job.refresh_from_db()
            progress(job.done, job.total, job.message if job.state == Job.State.RUNNING else job.state)
            if job.finished:
                return job
            if "waiting" in (job.result or {}):  # the model server went away: say so instead of waiting
                from indexing.errors import LLMBackendUnavailable

                raise LLMBackendUnavailable(
                    message=f"{job.message}; the request stays queued and runs by itself "
                    "once it answers (`pmd status` shows when it checks next)"
                )
            time.sleep(0.5)


# --- models --------------------------------------------------------------------------------


def _configured_models() -> dict[str, str]:
    from django.conf import settings

    configured = {
        "embed": settings.PMD_EMBED_MODEL,
        "generate": settings.PMD_GENERATE_MODEL,
        "rerank": settings.PMD_RERANK_MODEL,
    }
    return {
        role: name
        for role, name in configured.items()
        if str(name or "").strip() and str(name).strip().lower() not in {"none", "off", "false", "0", "no"}
    }


def _methods(backend) -> dict[str, str]:
    """How each role uses its model: embeddings, chat, and the re-ranking method."""
    from django.conf import settings

    from indexing.llm import rerank_backend
    from search import describe_method

    methods = {
        "embed": "embeddings" + (" in this process" if backend.kind == "local" else ""),
        "generate": "chat (query expansion)",
    }
    if settings.PMD_RERANK_MODEL:
        where = f" at {settings.PMD_RERANK_URL}" if settings.PMD_RERANK_URL else ""
        methods["rerank"] = (
            describe_method(rerank_backend(), settings.PMD_RERANK_MODEL, settings.PMD_RERANK_API) + where
        )
    return methods


def cmd_models_list(args) -> int:
    _use_index_config()
    from indexing.llm import backend_url, get_backend
    from indexing.llm.base import normalize_model_name

    backend = get_backend()
    models = backend.list_models()
    configured = _configured_models()
    methods = _methods(backend)
    by_name = {normalize_model_name(m.name) if backend.kind == "ollama" else m.name: m for m in models}
    rows = []
    for m in models:
        key = normalize_model_name(m.name) if backend.kind == "ollama" else m.name
        roles = [
            role
            for role, name in configured.items()
            if (normalize_model_name(name) if backend.kind == "ollama" else name) == key
        ]
        rows.append(
            {
                "name": m.name,
                "size": m.size,
                "family": m.family,
                "parameters": m.parameter_size,
                "quantization": m.quantization,
                "roles": roles,
                "present": True,
            }
        )
    for role, name in configured.items():
        key = normalize_model_name(name) if backend.kind == "ollama" else name
        if key not in by_name:
            existing = next((r for r in rows if r["name"] == name and r.get("configured")), None)
            if existing:
                existing["roles"].append(role)
            else:
                # a folder path (local backend) is present without being in the models folder
                present = backend.kind == "local" and role != "generate" and backend.has_model(name)
                rows.append(
                    {
                        "name": name,
                        "size": 0,
                        "family": "",
                        "parameters": "",
                        "quantization": "",
                        "roles": [role],
                        "present": present,
                        "configured": True,
                    }
                )
    for row in rows:
        row.pop("configured", None)
        row["methods"] = {role: methods.get(role, "") for role in row["roles"]}
    if args.json:
        print_json({"backend": backend.kind, "url": backend_url(), "models": rows})
        return 0
    from rich.table import Table

    console = stdout_console()
    console.print(f"{backend.kind} at {escape(backend_url())}")
    table = Table(box=None, header_style="bold")
    for col in ("model", "size", "family", "used for", "method", ""):
        table.add_column(col)
    for r in rows:
        size = f"{r['size'] / 1e9:.2f} GB" if r["size"] >= 1e8 else (f"{r['size'] / 1e6:.0f} MB" if r["size"] else "")
        state = "" if r["present"] else "[yellow]missing: `pmd models pull`[/]"
        table.add_row(
            escape(r["name"]), size, escape(r["family"]), ", ".join(r["roles"]), "; ".join(r["methods"].values()), state
        )
    console.print(table)
    return 0


def _use_index_config() -> None:
    """The index's backend and models, when its database answers (none is started for this): its
    first connection applies them (indexing/services/index_config.py)."""
    try:
        from pmd_site.runtime.process import database_answers

        database_answers()
    except Exception:  # noqa: BLE001 - no index to ask: this process's environment
        pass


def cmd_models_pull(args) -> int:
    import sys

    _use_index_config()

    from indexing.llm import get_backend

    backend = get_backend()
    console = stdout_console()
    wanted = list(args.models) or [m for m in dict.fromkeys(_configured_models().values()) if not backend.has_model(m)]
    if not wanted:
        console.print("every configured model is present")
        return 0
    for model in wanted:
        if not sys.stderr.isatty():
            console.print(f"pulling {escape(model)}…")
        with progress_bar(f"pulling {model}") as bar:
            backend.pull(model, progress=lambda p: bar(p.completed, p.total, p.status))
        console.print(f"pulled {escape(model)}")
    return 0
