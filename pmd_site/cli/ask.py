"""`pmd ask`: a question answered from the notes, streamed as it is written, every claim cited
(search.pipeline.answer; the same service as the web Ask mode, POST /api/ask and MCP pmd_ask)."""

from __future__ import annotations

import sys

from indexing.errors import CommandError


def register(sub) -> None:
    parser = sub.add_parser(
        "ask",
        help="answer a question from your notes with a chat model, citing them (PMD_ANSWER_MODEL)",
        description="Retrieves with hybrid search, gives the best passages to the chat model and prints "
        "its answer as it is written, then the sources its [n] stand for. When the notes "
        "do not cover the question it says so and lists the nearest notes.",
    )
    parser.add_argument("question", nargs="+", help="the question (quote it or not)")
    parser.add_argument(
        "-c",
        "--collection",
        action="append",
        dest="collections",
        default=[],
        metavar="NAME",
        help="ask only this collection (repeatable)",
    )
    parser.add_argument("--tag", action="append", dest="tags", default=[], metavar="TAG", help="notes with this tag")
    parser.add_argument(
        "--path", action="append", dest="paths", default=[], metavar="GLOB", help="notes whose path matches"
    )
    parser.add_argument("--after", metavar="DATE", help="notes dated on or after DATE")
    parser.add_argument("--before", metavar="DATE", help="notes dated before DATE")
    parser.add_argument(
        "--budget", type=int, metavar="TOKENS", help="tokens of passages given to the model (default PMD_ANSWER_BUDGET)"
    )
    parser.add_argument(
        "--follow-up",
        dest="conversation",
        metavar="ID",
        help="continue this conversation (the id a previous answer printed)",
    )
    parser.add_argument(
        "--json",
        action="store_const",
        const="json",
        dest="format",
        default="cli",
        help="output the whole answer as JSON once it is written",
    )
    parser.set_defaults(func=cmd_ask)


def cmd_ask(args) -> int:
    from pmd_site.cli.output import local_access, print_markup, write_text
    from search import AskRequest, ask_open, filters_from_options, render

    if args.budget is not None and args.budget < 200:
        raise CommandError("--budget must be at least 200 tokens")
    request = AskRequest(
        question=" ".join(args.question),
        access=local_access(),
        collections=list(args.collections),
        filters=filters_from_options(tags=args.tags, paths=args.paths, after=args.after, before=args.before),
        conversation=args.conversation,
        budget=args.budget,
    )
    answer = None
    streamed = args.format == "cli"
    for event in ask_open(request):
        if event.kind == "token" and streamed:
            write_text(event.text)
            sys.stdout.flush()
        elif event.kind == "done":
            answer = event.answer
    if args.format == "json":
        sys.stdout.write(render("ask", "json", answer))
        return 0
    print_markup(render("ask", "cli", answer, with_text=False))
    if answer.conversation:
        print(f"follow up: pmd ask --follow-up {answer.conversation} …", file=sys.stderr)
    return 0 if answer.state in ("answered", "refused") else 1
