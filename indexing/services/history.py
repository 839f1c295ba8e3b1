"""Indexing the git history of collections that live inside a git work tree.

What is indexed: the commits reachable from the current branch's HEAD (not other branches) that
change a file the collection indexes (its mask and ignore patterns, as the folder scan reads them:
`indexing.paths.Selection`), the newest PMD_HISTORY_MAX_COMMITS at most. A commit's file list and
diff hold only those files: `.env`, a file outside the mask or under an ignored folder is never
read from the history, so history search returns nothing note search would not. Git itself reads
the repository (`git log` through indexing/git.py, which turns off everything a repository's
configuration could make git run: signatures, external diff, textconv, hooks, ...); nothing
parses `.git` by hand.

Incremental: the reachable set is compared with the commits stored; only unseen commits are read
(a streaming `git log --stdin --no-walk` per batch, limited to the batch's files), and stored commits
no longer reachable (a rebase, a reset, an amended commit) are dropped with their text and vectors.
When HEAD is the one indexed last, nothing is read at all beyond two `git rev-parse`.

Bad input: a shallow clone indexes what it has (and says so); a diff is cut at
PMD_HISTORY_DIFF_LINES lines (each line at LINE_CHARS characters) with a marker, binary files
are git's one "Binary files differ" line; messages that are not UTF-8 are decoded with
replacement characters; a folder that stops being in a repository has its commits removed and
its status says why.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Callable, Iterator

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from indexing.git import git_popen, git_run, kill_group
from indexing.keyword import prepare_text
from indexing.locks import advisory_lock, collection_lock_key
from indexing.models import Collection, CollectionHistory, Commit, Content
from indexing.paths import Selection

log = logging.getLogger(__name__)

ProgressCallback = Callable[[int, int, str], None]
BATCH = 500
LINE_CHARS = 400  # a longer diff line (minified files) is cut
FORMAT_VERSION = 3  # bump when the stored text changes: every history is read again
GIT_TIMEOUT = 600
_HEADER_START, _HEADER_END = b"\x1e", b"\x1f"
_LOG_FORMAT = "%x1e%H%x00%P%x00%an%x00%ae%x00%cI%x00%B%x00%x1f"


class GitFailed(Exception):
    """git answered with an error; the message is its own."""


@dataclass
class HistoryReport:
    collection: str
    state: str = CollectionHistory.State.NOT_REPOSITORY
    added: int = 0
    removed: int = 0
    total: int = 0
    message: str = ""
    elapsed: float = 0.0
    unchanged: bool = False  # HEAD was the one indexed last: nothing read
    content_hashes: list[str] = field(default_factory=list)  # of the commits added (to embed)

    @property
    def commits_per_second(self) -> float:
        return self.added / self.elapsed if self.elapsed else 0.0

    def as_dict(self) -> dict:
        return {
            "collection": self.collection,
            "state": self.state,
            "added": self.added,
            "removed": self.removed,
            "commits": self.total,
            "message": self.message,
            "elapsed_seconds": round(self.elapsed, 3),
        }


# --- git --------------------------------------------------------------------------------------


def _git(root: str, *args: str, stdin: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
    result = git_run(root, *args, stdin=stdin, timeout=GIT_TIMEOUT)
    if check and result.returncode != 0:
        raise GitFailed(
            _text(result.stderr).strip().splitlines()[-1]
            if result.stderr.strip()
            else f"git {args[0]} failed ({result.returncode})"
        )
    return result


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").replace("\x00", "")


@dataclass
class Repository:
    top: str  # the work tree's top folder
    head: str  # "" when the repository has no commit yet
    branch: str  # "" on a detached HEAD
    shallow: bool
    pathspec: list[str]  # ["--", "."] when the collection is a subfolder of the work tree, else []


def repository_of(root: str) -> Repository | None:
    """The git work tree `root` lies in (None if it lies in none)."""
    probe = _git(root, "rev-parse", "--show-toplevel", "--is-shallow-repository", check=False)
    if probe.returncode != 0:
        message = _text(probe.stderr)
        if "not a git repository" in message or not os.path.isdir(root):
            return None
        raise GitFailed(message.strip().splitlines()[-1] if message.strip() else "git rev-parse failed")
    lines = _text(probe.stdout).splitlines()
    if len(lines) < 2 or not lines[0]:
        return None  # inside .git itself, or a bare repository
    top, shallow = lines[0], lines[1].strip() == "true"
    head = _text(_git(root, "rev-parse", "-q", "--verify", "HEAD^{commit}", check=False).stdout).strip()
    branch = _text(_git(root, "symbolic-ref", "-q", "--short", "HEAD", check=False).stdout).strip()
    inside = os.path.realpath(root) != os.path.realpath(top)
    return Repository(top, head, branch, shallow, ["--", "."] if inside else [])


# Read-only switches for every `git log`: no signature check (gpg), no external diff, no textconv
# driver, however the repository is configured (indexing/git.py turns off the rest).
_LOG_SAFE = ("--no-show-signature", "--no-ext-diff", "--no-textconv", "--no-color")


@dataclass
class Selected:
    sha: str
    paths: list[str]  # the changed files the collection indexes


def selected_commits(root: str, repo: Repository, selection: Selection, limit: int) -> Iterator[Selected]:
    """The newest `limit` commits reachable from HEAD that change a file the collection indexes
    (its mask and ignore patterns: `Selection`), newest first, each with those files.

    One streaming `git log --name-only`; a commit that changes only other files (`.env`,
    `private/` when ignored) is not read at all."""
    process = git_popen(
        root,
        "-c",
        "core.quotePath=false",
        "log",
        "--format=%x00%H",
        "--name-only",
        "-z",
        "--no-renames",
        "--diff-merges=first-parent",
        "--relative",
        *_LOG_SAFE,
        "HEAD",
        *repo.pathspec,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    errors: list[bytes] = []
    drain = threading.Thread(target=lambda: errors.append(process.stderr.read()), daemon=True)
    drain.start()
    found = 0
    current: Selected | None = None
    expect_sha = first_name = False
    tail = b""
    try:
        while found < limit:
            chunk = process.stdout.read(1 << 16)
            tokens = (tail + chunk).split(b"\x00")
            tail = tokens.pop() if chunk else b""
            for token in tokens:
                if token == b"":  # names are never empty: a commit follows
                    expect_sha = True
                    continue
                if expect_sha:
                    if current is not None and current.paths:
                        yield current
                        found += 1
                        if found >= limit:
                            break
                    current, expect_sha, first_name = Selected(token.decode("ascii", "replace"), []), False, True
                    continue
                if current is None:
                    continue
                name = token[1:] if first_name and token.startswith(b"\n") else token
                first_name = False
                path = name.decode("utf-8", "surrogateescape")
                if selection.selects(path):
                    current.paths.append(path)
            if not chunk:
                break
        if found < limit and current is not None and current.paths:
            yield current
    finally:
        if process.poll() is None:
            kill_group(process)
        process.wait()
        drain.join(timeout=5)
    if process.returncode not in (0, -9) and errors and errors[0].strip():
        raise GitFailed(_text(errors[0]).strip().splitlines()[-1])


@dataclass
class ReadCommit:
    sha: str
    parents: list[str]
    author_name: str
    author_email: str
    committed_at: datetime
    message: str
    changes: list[dict] = field(default_factory=list)
    diff_lines: list[str] = field(default_factory=list)
    diff_more: int = 0  # lines cut

    @property
    def title(self) -> str:
        return self.message.split("\n", 1)[0].strip()[:1000]


def _unquote(path: str) -> str:
    """A path git quoted C-style (tabs, newlines, quotes in the name)."""
    if not (path.startswith('"') and path.endswith('"')):
        return path
    raw = path[1:-1].encode("latin-1", errors="replace").decode("unicode_escape", errors="replace")
    return raw.encode("latin-1", errors="replace").decode("utf-8", errors="replace")


def _raw_change(line: str) -> dict | None:
    """`:100644 100644 abc def R100\told\tnew` as {"status", "path", "old_path"}."""
    meta, _, names = line.partition("\t")
    fields = meta.split()
    if len(fields) < 5 or not names:
        return None
    status = fields[4][:1]
    parts = [_unquote(p) for p in names.split("\t")]
    if status in ("R", "C") and len(parts) >= 2:
        return {"status": status, "path": parts[1], "old_path": parts[0]}
    return {"status": status, "path": parts[0], "old_path": ""}


def read_commits(
    root: str, repo: Repository, shas: list[str], *, diff_lines: int, paths: list[str]
) -> Iterator[ReadCommit]:
    """The commits `shas` with their changes and diff excerpt, limited to `paths` (the files the
    collection indexes, as `selected_commits` found them), read by one streaming `git log`.

    Only the first `diff_lines` lines of each diff are kept; the rest is counted as it streams
    by, so a huge diff costs time but no memory. The paths are literal (no glob, no magic) and
    a rename is seen only between two of them: a file moved out of `private/` shows as added."""
    paths = [p for p in dict.fromkeys(paths) if "\n" not in p and "\r" not in p]  # one path a line
    if not shas or not paths:
        return
    args = [
        "--literal-pathspecs",
        "-c",
        "core.quotePath=false",
        "log",
        "--stdin",
        "--no-walk=unsorted",
        f"--format={_LOG_FORMAT}",
        "--encoding=UTF-8",
        "--raw",
        "--no-abbrev",
        "-M",
        *_LOG_SAFE,
        "--diff-merges=first-parent",
        "--relative",
    ]
    if diff_lines:
        args.append("-p")
    process = git_popen(root, *args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    listed = ("\n".join(shas) + "\n--\n" + "\n".join(paths) + "\n").encode("utf-8", "surrogateescape")

    def feed() -> None:
        try:
            process.stdin.write(listed)
            process.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    errors: list[bytes] = []
    threading.Thread(target=feed, daemon=True).start()
    drain = threading.Thread(target=lambda: errors.append(process.stderr.read()), daemon=True)
    drain.start()
    current: ReadCommit | None = None
    header: list[bytes] | None = None
    in_patch = False
    try:
        for raw in process.stdout:
            if header is not None or raw.startswith(_HEADER_START):
                header = (header or []) + [raw]
                if _HEADER_END in raw:
                    if current is not None:
                        yield current
                    current, header, in_patch = _commit_header(b"".join(header)), None, False
                continue
            if current is None:
                continue
            line = raw.rstrip(b"\n")
            if not in_patch and line.startswith(b":"):
                change = _raw_change(_text(line))
                if change:
                    current.changes.append(change)
                continue
            if not in_patch:
                if not line.startswith(b"diff "):
                    continue
                in_patch = True
            if len(current.diff_lines) < diff_lines:
                text = _text(line)
                current.diff_lines.append(text if len(text) <= LINE_CHARS else text[:LINE_CHARS] + " …")
            else:
                current.diff_more += 1
        if current is not None:
            yield current
    finally:
        if process.poll() is None:
            kill_group(process)
        process.wait()
        drain.join(timeout=5)
    if process.returncode not in (0, -9) and errors and errors[0].strip():
        raise GitFailed(_text(errors[0]).strip().splitlines()[-1])


def _commit_header(raw: bytes) -> ReadCommit:
    body = raw[raw.index(_HEADER_START) + 1 : raw.rindex(_HEADER_END)]
    parts = body.split(b"\x00")
    parts += [b""] * (6 - len(parts))
    sha, parents, name, email, date, message = (_text(p) for p in parts[:6])
    try:
        when = datetime.fromisoformat(date.strip())
    except ValueError:
        when = datetime.fromtimestamp(0, tz=dt_timezone.utc)
    return ReadCommit(
        sha=sha.strip(),
        parents=parents.split(),
        author_name=name[:500],
        author_email=email[:500],
        committed_at=when,
        message=message.strip("\n").replace("\r\n", "\n"),
    )


# --- the stored text ----------------------------------------------------------------------------

_STATUS_WORDS = {"A": "added", "M": "changed", "D": "deleted", "R": "renamed", "C": "copied", "T": "type changed"}


def change_line(change: dict) -> str:
    word = _STATUS_WORDS.get(change["status"], change["status"])
    if change.get("old_path"):
        return f"{word} {change['old_path']} → {change['path']}"
    return f"{word} {change['path']}"


def diff_excerpt(commit: ReadCommit) -> str:
    text = "\n".join(commit.diff_lines)
    if commit.diff_more:
        text += (
            f"\n… {commit.diff_more} more line(s) of diff not shown "
            f"(the first {len(commit.diff_lines)} are kept: PMD_HISTORY_DIFF_LINES)"
        )
    return text


def commit_text(commit: ReadCommit, diff: str) -> str:
    """What keyword and vector search read for a commit: message, author, date, files, diff."""
    parts = [
        commit.message or "(no message)",
        "",
        f"Author: {commit.author_name} <{commit.author_email}>",
        f"Date: {commit.committed_at.isoformat()}",
        f"Commit: {commit.sha}",
    ]
    if commit.changes:
        parts += ["", "Files:"] + [change_line(c) for c in commit.changes]
    if diff:
        parts += ["", "Diff:", diff]
    return "\n".join(parts) + "\n"


def _settings_key(collection: Collection) -> str:
    """What the stored commits were read under: another mask or ignore pattern reads them again."""
    selection = hashlib.sha256(Selection.of(collection).key().encode()).hexdigest()[:16]
    return (
        f"v{FORMAT_VERSION}:diff{settings.PMD_HISTORY_DIFF_LINES}:max{settings.PMD_HISTORY_MAX_COMMITS}"
        f":files{selection}"
    )


# --- the service --------------------------------------------------------------------------------


def history_index(
    collection: Collection, *, progress: ProgressCallback | None = None, max_commits: int | None = None
) -> HistoryReport:
    """Bring a collection's stored commits in line with its repository (see the module docstring).

    One indexer per collection at a time (the scan's lock, taken after the scan released it)."""
    with advisory_lock(key=collection_lock_key(collection.pk)):
        return _history_index(collection, progress=progress, max_commits=max_commits)


def _history_index(
    collection: Collection, *, progress: ProgressCallback | None, max_commits: int | None
) -> HistoryReport:
    started = time.perf_counter()
    report = HistoryReport(collection=collection.name)
    status, _ = CollectionHistory.objects.get_or_create(collection=collection)
    root = collection.root_path
    limit = max_commits or settings.PMD_HISTORY_MAX_COMMITS
    key = _settings_key(collection) + (f":cap{limit}" if max_commits else "")
    try:
        repo = repository_of(root) if settings.PMD_HISTORY and os.path.isdir(root) else None
    except (GitFailed, OSError, subprocess.SubprocessError) as exc:
        return _stop(status, report, CollectionHistory.State.FAILED, f"git cannot read the folder: {exc}", started)
    if repo is None:
        why = (
            "history indexing is off (PMD_HISTORY=false)"
            if not settings.PMD_HISTORY
            else "the folder is not inside a git work tree"
        )
        return _stop(status, report, CollectionHistory.State.NOT_REPOSITORY, why, started)
    if not repo.head:
        return _stop(
            status, report, CollectionHistory.State.EMPTY, "the repository has no commits yet", started, repo=repo
        )
    if _up_to_date(status, repo, key):
        report.state, report.unchanged, report.total = status.state, True, status.commits
        report.message = status.message
        report.elapsed = time.perf_counter() - started
        return report
    if status.settings_key != key or status.repository != repo.top:
        report.removed += _drop(collection, None)  # other settings or another repository: read it all again
    try:
        reachable = _new_commits_stored(collection, repo, limit, report, progress)
    except (GitFailed, OSError, subprocess.SubprocessError) as exc:
        return _stop(
            status,
            report,
            CollectionHistory.State.FAILED,
            f"git cannot read the history: {exc}",
            started,
            repo=repo,
            keep=True,
        )
    report.total = Commit.objects.filter(collection=collection).count()
    _mark_indexed(status, report, repo, key, limit=limit, capped=reachable >= limit)
    report.elapsed = time.perf_counter() - started
    return report


def _up_to_date(status: CollectionHistory, repo: Repository, key: str) -> bool:
    """Indexed already, at this head, with these settings, from this repository, as shallow as now."""
    return (
        status.state == CollectionHistory.State.INDEXED
        and status.head == repo.head
        and status.settings_key == key
        and status.repository == repo.top
        and status.shallow == repo.shallow
    )


def _new_commits_stored(
    collection: Collection, repo: Repository, limit: int, report: HistoryReport, progress: ProgressCallback | None
) -> int:
    """The selected commits made the indexed ones: those no longer selected dropped, the new ones
    read and stored. Returns how many commits are selected."""
    root = collection.root_path
    selection = Selection.of(collection)
    selected = list(selected_commits(root, repo, selection, limit))
    known = set(Commit.objects.filter(collection=collection).values_list("sha", flat=True))
    gone = known - {c.sha for c in selected}
    if gone:
        report.removed += _drop(collection, gone)
    new = [c for c in selected if c.sha not in known]
    report.added = _commits_read(collection, repo, new, report, progress)
    if report.added >= 1000 and not connection.in_atomic_block:
        with connection.cursor() as cursor:  # fresh statistics for the planner after a bulk load
            cursor.execute("ANALYZE indexing_commit")
    return len(selected)


def _commits_read(
    collection: Collection,
    repo: Repository,
    new: list[Selected],
    report: HistoryReport,
    progress: ProgressCallback | None,
) -> int:
    """Read and store the new commits, BATCH at a time; returns how many were read."""
    root = collection.root_path
    if progress:
        progress(0, len(new), "reading commits")
    done = 0
    # a batch of commits a `git log`, limited to the files they change that the collection
    # indexes: few paths per git, whatever the history's size
    for start in range(0, len(new), BATCH):
        part = new[start : start + BATCH]
        batch = list(
            read_commits(
                root,
                repo,
                [c.sha for c in part],
                diff_lines=settings.PMD_HISTORY_DIFF_LINES,
                paths=[p for c in part for p in c.paths],
            )
        )
        if batch:
            report.content_hashes += _store(collection, batch)
        done += len(batch)
        if progress:
            progress(done, len(new), f"commits {part[-1].sha[:10]}")
    if progress:
        progress(done, len(new), "commits")
    return done


def _mark_indexed(
    status: CollectionHistory, report: HistoryReport, repo: Repository, key: str, *, limit: int, capped: bool
) -> None:
    """The history is indexed: the report's state and notes (a shallow clone, a cap on the
    commits), saved with what the next run compares."""
    notes = []
    if repo.shallow:
        notes.append("shallow clone: only the commits it holds are indexed (`git fetch --unshallow` for all)")
    if capped:
        notes.append(f"only the newest {limit:,} commits are indexed (PMD_HISTORY_MAX_COMMITS)")
    report.state, report.message = CollectionHistory.State.INDEXED, "; ".join(notes)
    CollectionHistory.objects.filter(pk=status.pk).update(
        state=report.state,
        message=report.message,
        repository=repo.top,
        branch=repo.branch,
        head=repo.head,
        shallow=repo.shallow,
        capped=capped,
        settings_key=key,
        commits=report.total,
        indexed_at=timezone.now(),
    )


def _stop(
    status: CollectionHistory,
    report: HistoryReport,
    state: str,
    message: str,
    started: float,
    *,
    repo: Repository | None = None,
    keep: bool = False,
) -> HistoryReport:
    """Record why the history is not (or no longer) indexed; its commits go unless `keep`."""
    if not keep:
        report.removed += _drop(status.collection, None)
    report.state, report.message = state, message
    report.total = Commit.objects.filter(collection_id=status.collection_id).count()
    CollectionHistory.objects.filter(pk=status.pk).update(
        state=state,
        message=message,
        repository=repo.top if repo else "",
        branch=repo.branch if repo else "",
        head="" if not keep else status.head,
        shallow=bool(repo and repo.shallow),
        commits=report.total,
        settings_key="" if not keep else status.settings_key,
        indexed_at=timezone.now(),
    )
    report.elapsed = time.perf_counter() - started
    return report


def _drop(collection: Collection, shas: set[str] | None) -> int:
    """Remove commits (all of the collection's with None), and their text and vectors when nothing
    else uses them."""
    commits = Commit.objects.filter(collection=collection)
    removed = 0
    if shas is None:
        hashes = list(commits.values_list("content_id", flat=True))
        with transaction.atomic():
            removed, _ = commits.delete()
            _forget_contents(hashes)
        return removed
    wanted = sorted(shas)
    for start in range(0, len(wanted), 5000):
        part = commits.filter(sha__in=wanted[start : start + 5000])
        hashes = list(part.values_list("content_id", flat=True))
        with transaction.atomic():
            count, _ = part.delete()
            _forget_contents(hashes)
        removed += count
    return removed


def _forget_contents(hashes: list[str]) -> None:
    if hashes:
        Content.objects.filter(hash__in=hashes, documents__isnull=True, commits__isnull=True).delete()


_TSV = """
UPDATE indexing_commit c
SET tsv_head = h.vector, tsv = h.vector || setweight(to_tsvector(h.config::regconfig, h.diff), 'D')
FROM (SELECT s.id, s.config, s.diff,
             setweight(to_tsvector(s.config::regconfig, s.head), 'A')
             || setweight(to_tsvector(s.config::regconfig, s.body), 'B')
             || setweight(to_tsvector(s.config::regconfig, s.meta), 'C') AS vector
      FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[])
           AS s(id, config, head, body, meta, diff)) h
WHERE c.id = h.id
"""


def _clean(text: str) -> str:
    return prepare_text(text).replace("\x00", "")


def _store(collection: Collection, batch: list[ReadCommit]) -> list[str]:
    """Write one batch of commits with their text and keyword vectors; returns the content hashes."""
    contents: dict[str, Content] = {}
    rows = []
    for commit in batch:
        diff = diff_excerpt(commit)
        text = commit_text(commit, diff)
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        contents[digest] = Content(hash=digest, body=text, size=len(text.encode("utf-8", "surrogatepass")))
        paths = list(dict.fromkeys(p for c in commit.changes for p in (c["path"], c.get("old_path")) if p))
        rows.append(
            Commit(
                collection=collection,
                sha=commit.sha,
                parents=commit.parents,
                title=commit.title,
                message=commit.message,
                author_name=commit.author_name,
                author_email=commit.author_email,
                committed_at=commit.committed_at,
                changes=commit.changes,
                paths=paths,
                diff=diff,
                diff_truncated=commit.diff_more > 0,
                content_id=digest,
            )
        )
    config = collection.text_search_config or "simple"
    with transaction.atomic():
        Content.objects.bulk_create(contents.values(), ignore_conflicts=True, batch_size=BATCH)
        created = Commit.objects.bulk_create(rows, batch_size=BATCH, ignore_conflicts=False)
        columns: tuple[list, ...] = ([], [], [], [], [], [])
        for row in created:
            body = row.message.split("\n", 1)[1] if "\n" in row.message else ""
            # paths as written and as words: "on-call/rota.md" is found by "rota" and "on-call"
            meta = " ".join(
                [row.author_name, row.author_email, *row.paths, *(re.sub(r"[/._-]+", " ", p) for p in row.paths)]
            )
            values = (row.id, config, _clean(row.title), _clean(body), _clean(meta), _clean(row.diff))
            for column, value in zip(columns, values):
                column.append(value)
        with connection.cursor() as cursor:
            cursor.execute(_TSV, list(columns))
    return list(contents)


def history_status(collection: Collection) -> dict:
    """What `pmd collection show` and the status pages say about a collection's history."""
    status = CollectionHistory.objects.filter(collection=collection).first()
    if status is None:
        return {"state": "not_indexed", "message": "not read yet: `pmd update`", "commits": 0}
    return {
        "state": status.state,
        "message": status.message,
        "commits": status.commits,
        "branch": status.branch,
        "head": status.head,
        "shallow": status.shallow,
        "capped": status.capped,
        "indexed_at": status.indexed_at.isoformat() if status.indexed_at else None,
    }
