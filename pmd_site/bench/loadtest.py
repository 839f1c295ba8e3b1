"""Load test for the JSON API and the MCP endpoint: requests/s and p50/p99 latency.

    python -m pmd_site.bench.loadtest                       # self-contained: fresh PMD_HOME, Cranfield corpus
    python -m pmd_site.bench.loadtest --url http://127.0.0.1:8000 --token pmd_…   # an already running server

Self-contained mode indexes a small corpus into a throwaway PMD_HOME, creates a token, starts
`uvicorn pmd_site.asgi:application` as a separate process on loopback, and drives it from this
process with N concurrent keep-alive clients for a bounded time per scenario. Every request must
succeed (HTTP 200, no JSON-RPC or tool error); the exit status is 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from django.contrib.auth import get_user_model
from django.db import connections

from pmd_site.bench.quality import percentile
from pmd_site.runtime.postgres_server import EmbeddedPostgres
from pmd_site.runtime.process import ensure_database, migrate, setup_django

# ../shared/datasets beside the repository (see the README's Benchmarks section).
DEFAULT_CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "datasets" / "cranfield"
FALLBACK_QUERIES = ["vector index", "postgres tuning", "meeting notes", "search", "hnsw"]


async def _drive(url: str, token: str, target: str, concurrency: int, duration: float, queries: list[str]) -> dict:
    headers = {"Authorization": f"Bearer {token}"}
    latencies: list[float] = []
    errors: list[str] = []
    stop_at = time.perf_counter() + duration

    def request_for(i: int) -> tuple[str, dict, dict]:
        query = queries[i % len(queries)]
        if target == "api":
            return "/api/search", {"query": query, "limit": 10}, {}
        body = {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {"name": "pmd_search", "arguments": {"query": query, "limit": 10}},
        }
        return "/mcp", body, {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}

    def check(target_: str, response) -> str | None:
        if response.status_code != 200:
            return f"HTTP {response.status_code}: {response.text[:200]}"
        data = response.json()
        if target_ == "mcp":
            if "error" in data:
                return f"JSON-RPC error: {data['error']}"
            if data["result"].get("isError"):
                return f"tool error: {data['result']['content'][0]['text'][:200]}"
        elif "results" not in data:
            return f"unexpected body: {str(data)[:200]}"
        return None

    async def client(worker: int, http) -> None:
        i = worker
        while time.perf_counter() < stop_at:
            path, body, extra = request_for(i)
            i += concurrency
            started = time.perf_counter()
            try:
                response = await http.post(path, json=body, headers=extra)
                problem = check(target, response)
            except Exception as exc:  # noqa: BLE001 - every failure is counted and reported
                problem = f"{exc.__class__.__name__}: {exc}"
            latencies.append(time.perf_counter() - started)
            if problem:
                errors.append(problem)

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=60) as http:
        # one warm-up request per connection outside the measurement
        warm = [request_for(i) for i in range(concurrency)]
        await asyncio.gather(*(http.post(path, json=body, headers=extra) for path, body, extra in warm))
        stop_at = time.perf_counter() + duration
        began = time.perf_counter()
        await asyncio.gather(*(client(w, http) for w in range(concurrency)))
        elapsed = time.perf_counter() - began
    return {
        "target": "/api/search" if target == "api" else "MCP pmd_search",
        "concurrency": concurrency,
        "seconds": round(elapsed, 2),
        "requests": len(latencies),
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "rps": round(len(latencies) / elapsed, 1),
        "p50_ms": round(percentile(latencies, 50) * 1000, 1),
        "p99_ms": round(percentile(latencies, 99) * 1000, 1),
        "mean_ms": round(statistics.fmean(latencies) * 1000, 1) if latencies else 0.0,
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _prepare(home: Path, corpus: Path | None) -> tuple[str, list[str], int]:
    """Index the corpus under `home`, make a token; returns (token, queries, documents)."""
    os.environ["PMD_HOME"] = str(home)
    os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("PMD_SECRET_KEY", "loadtest-only-secret")
    setup_django()
    ensure_database()
    migrate()

    # These need Django, which this script sets up just above (after choosing PMD_HOME).
    from indexing.access import Access  # noqa: PLC0415 - needs Django, set up just above
    from indexing.services.collections import collection_create  # noqa: PLC0415 - needs Django, set up just above
    from indexing.services.scanning import collection_index  # noqa: PLC0415 - needs Django, set up just above
    from indexing.services.tokens import token_create  # noqa: PLC0415 - needs Django, set up just above

    if corpus is not None and (corpus / "docs").is_dir():
        collection = collection_create(path=corpus / "docs", name="bench")
        queries = [
            line.split("\t", 1)[1].strip() for line in (corpus / "queries.tsv").read_text().splitlines() if "\t" in line
        ][:200]
    else:
        source = corpus or Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "corpus"
        collection = collection_create(path=source, name="bench")
        queries = FALLBACK_QUERIES
    report = collection_index(collection)
    user = get_user_model().objects.create_user("loadtest", password=None)

    connections.close_all()
    return token_create(user=user, name="loadtest", access=Access.local_user()).raw, queries, report.files_seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pmd_site.bench.loadtest", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a running server (with --token); default: start one")
    parser.add_argument("--token", help="API token for --url")
    parser.add_argument(
        "--corpus",
        type=Path,
        default=DEFAULT_CORPUS,
        help="dataset folder with docs/ and queries.tsv, or a markdown folder",
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per scenario (default 10)")
    parser.add_argument("--workers", type=int, default=2, help="uvicorn worker processes (default 2)")
    parser.add_argument("--targets", nargs="+", choices=["api", "mcp"], default=["api", "mcp"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    home = server = None
    queries = FALLBACK_QUERIES
    documents = None
    try:
        if args.url:
            if not args.token:
                parser.error("--url needs --token")
            url, token = args.url.rstrip("/"), args.token
        else:
            home = Path(tempfile.mkdtemp(prefix="pmd-loadtest-"))
            print(f"indexing {args.corpus} into {home} …", file=sys.stderr)
            token, queries, documents = _prepare(home, args.corpus if args.corpus.exists() else None)
            port = _free_port()
            url = f"http://127.0.0.1:{port}"
            server = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "pmd_site.asgi:application",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--workers",
                    str(args.workers),
                    "--lifespan",
                    "on",
                    "--log-level",
                    "warning",
                    "--no-access-log",
                    "--no-proxy-headers",
                    "--timeout-keep-alive",
                    "30",
                ],
                env={**os.environ},
                cwd=Path(__file__).resolve().parent.parent,
                start_new_session=True,
            )
            _wait_for(url, server)
        results = []
        for target in args.targets:
            for concurrency in args.concurrency:
                result = asyncio.run(_drive(url, token, target, concurrency, args.duration, queries))
                results.append(result)
                if not args.json:
                    print(
                        f"{result['target']:<16} c={concurrency:<3} {result['requests']:>6} req in "
                        f"{result['seconds']:>5}s  {result['rps']:>7} req/s  p50 {result['p50_ms']:>6} ms  "
                        f"p99 {result['p99_ms']:>6} ms  errors {result['errors']}"
                        + (f"  ({result['first_error']})" if result["first_error"] else "")
                    )
        if args.json:
            print(json.dumps({"documents": documents, "workers": args.workers, "results": results}, indent=2))
        return 1 if any(r["errors"] for r in results) else 0
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        if home is not None:
            EmbeddedPostgres(home).destroy()
            shutil.rmtree(home, ignore_errors=True)


def _wait_for(url: str, server: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with status {server.returncode}")
        try:
            if httpx.get(f"{url}/api/status", timeout=2).status_code == 401:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("the server did not start in time")


if __name__ == "__main__":
    sys.exit(main())
