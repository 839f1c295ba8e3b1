"""Memory of pmd's own processes under `pmd up` with the in-process models, while it indexes and
embeds a folder of notes and then answers searches:

    .venv/bin/python scripts/bench/memory.py MODEL_FOLDER [--notes 300] [--queries 30]

Copies the first --notes SciFact notes into a scratch folder, starts `pmd up` on it in a scratch
PMD_HOME (PMD_LLM_BACKEND=local, PMD_EMBED_MODEL=MODEL_FOLDER), waits until every note has
vectors, runs --queries semantic and hybrid searches through the running server (client mode,
so the web process embeds the queries), stops it, and prints each process's peak RSS and PSS
(sampled every 0.5 s) and the peak of their sum. PostgreSQL and Redis are not counted.
--profile small runs `pmd up` with PMD_PROFILE=small.
--checkout DIR runs the pmd code of another checkout (e.g. a `git worktree` of an older commit,
through PYTHONPATH, with this virtualenv) to compare versions side by side."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
NOT_PMD = {"postgres", "redis-server"}


def role(proc: psutil.Process, up_pid: int) -> str:
    """A name for the process: its pmd command, `…/child` for a pool process of a worker."""
    try:
        argv = proc.cmdline()
    except psutil.Error:
        return "?"
    if proc.pid == up_pid:
        return "up (supervisor)"
    words = " ".join(argv)
    for word, name in (
        ("serve", "web"),
        ("--queues index", "worker (index)"),
        ("--queues embed", "embedder"),
        (" worker", "worker"),
        (" beat", "beat"),
        (" watch", "watcher"),
    ):
        if word in words:
            parent = proc.parent()
            child = parent is not None and parent.pid != up_pid and word in " ".join(parent.cmdline())
            return f"{name}/child" if child else name
    return os.path.basename(argv[0]) if argv else "?"


def high_water_mark(pid: int) -> int:
    """The process's peak RSS so far (bytes), from /proc; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Sampler(threading.Thread):
    def __init__(self, up_pid: int, every: float = 0.5):
        super().__init__(daemon=True)
        self.up_pid, self.every = up_pid, every
        self.peak_rss: dict[str, int] = {}
        self.peak_pss: dict[str, int] = {}
        self.peak_sum_rss = self.peak_sum_pss = 0
        self.peak_sum_serving = 0  # without the child that makes the int8 copy (once per model file)
        # The copy's child peaks for about a second, between two samples: a thread per child reads its
        # own high-water mark (VmHWM) every 20 ms until it ends; added to the largest sum of the others
        # sampled while it ran, that bounds the sum from above.
        self.copy_hwm: dict[int, int] = {}
        self.others_while_copying = 0
        self.at_peak: dict[str, int] = {}  # each process's RSS in the sample of the largest sum
        self.peak_at = 0.0
        self.started = time.monotonic()
        self.stop = threading.Event()

    def _watch_copy(self, pid: int) -> None:
        while mark := high_water_mark(pid):  # 0 once it has ended
            self.copy_hwm[pid] = max(self.copy_hwm[pid], mark)
            time.sleep(0.02)

    def run(self) -> None:
        while not self.stop.wait(self.every):
            try:
                up = psutil.Process(self.up_pid)
                procs = [up, *up.children(recursive=True)]
            except psutil.Error:
                continue
            total_rss = total_pss = copying = 0
            seen: dict[str, int] = {}
            sample: dict[str, int] = {}
            for proc in procs:
                try:
                    if proc.name() in NOT_PMD:
                        continue
                    info = proc.memory_full_info()
                    name = role(proc, self.up_pid)
                except psutil.Error:
                    continue
                seen[name] = seen.get(name, 0) + 1
                if seen[name] > 1:
                    name = f"{name} #{seen[name]}"
                total_rss += info.rss
                total_pss += info.pss
                sample[name] = info.rss
                if "indexing.llm.quantize" in " ".join(proc.cmdline()):
                    copying += info.rss
                    if proc.pid not in self.copy_hwm:
                        self.copy_hwm[proc.pid] = 0
                        threading.Thread(target=self._watch_copy, args=(proc.pid,), daemon=True).start()
                self.peak_rss[name] = max(self.peak_rss.get(name, 0), info.rss)
                self.peak_pss[name] = max(self.peak_pss.get(name, 0), info.pss)
            if total_rss > self.peak_sum_rss:
                self.at_peak, self.peak_at = sample, time.monotonic() - self.started
            self.peak_sum_rss = max(self.peak_sum_rss, total_rss)
            self.peak_sum_serving = max(self.peak_sum_serving, total_rss - copying)
            if copying:
                self.others_while_copying = max(self.others_while_copying, total_rss - copying)
            self.peak_sum_pss = max(self.peak_sum_pss, total_pss)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--dataset", default=str(ROOT.parent / "shared/datasets/scifact"))
    parser.add_argument("--notes", type=int, default=300)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--port", type=int, default=8791)
    parser.add_argument("--pmd", default=str(ROOT / ".venv/bin/pmd"))
    parser.add_argument("--checkout", help="run the pmd code in this folder instead (PYTHONPATH)")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--profile", help="PMD_PROFILE for `pmd up` (default or small)")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="pmd-mem-"))
    scratch.chmod(0o755)  # as root the embedded PostgreSQL runs as its own user and must enter it
    notes = scratch / "notes"
    notes.mkdir()
    for path in sorted((Path(args.dataset) / "docs").glob("*.md"))[: args.notes]:
        shutil.copy(path, notes / path.name)
    queries = [
        line.split("\t", 1)[1].strip()
        for line in (Path(args.dataset) / "queries.tsv").read_text().splitlines()[: args.queries]
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMD_", "DATABASE_", "CELERY_"))}
    env.update(
        PMD_HOME=str(scratch / "home"),
        PMD_LLM_BACKEND="local",
        PMD_EMBED_MODEL=str(Path(args.model).resolve()),
        PMD_LOG_LEVEL="WARNING",
    )
    if args.profile:
        env["PMD_PROFILE"] = args.profile
    if args.checkout:
        env["PYTHONPATH"] = str(Path(args.checkout).resolve())
    log = open(scratch / "up.log", "w")  # noqa: SIM115 - pmd up writes to it until the finally below
    up = subprocess.Popen(
        [args.pmd, "up", str(notes), "--port", str(args.port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    sampler = Sampler(up.pid)
    sampler.start()
    started = time.monotonic()
    phases = {}
    try:
        while True:
            time.sleep(3)
            if up.poll() is not None:
                raise SystemExit(f"pmd up exited: see {scratch / 'up.log'}")
            status = subprocess.run([args.pmd, "status", "--json"], env=env, capture_output=True, text=True)
            try:
                embeddings = json.loads(status.stdout).get("embeddings", {})
            except ValueError:
                continue
            if embeddings.get("contents", 0) >= args.notes and not embeddings.get("pending"):
                break
            if time.monotonic() - started > args.timeout:
                raise SystemExit("timed out waiting for the embeddings")
        phases["index + embed"] = time.monotonic() - started
        searched = time.monotonic()
        for i, text in enumerate(queries):
            verb = "vsearch" if i % 2 == 0 else "query"
            subprocess.run([args.pmd, verb, text, "-n", "5"], env=env, capture_output=True, check=False)
        phases["searches"] = time.monotonic() - searched
    finally:
        sampler.stop.set()
        sampler.join()
        if up.poll() is None:
            up.send_signal(signal.SIGINT)  # pmd up stops its children and the servers it started
            try:
                up.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(up.pid, signal.SIGKILL)
        log.close()
    mb = 1024 * 1024
    print(
        f"{args.notes} SciFact notes, {args.queries} searches; {args.checkout or ROOT}"
        + (f" PMD_PROFILE={args.profile}" if args.profile else "")
        + "; "
        + ", ".join(f"{k} {v:.0f} s" for k, v in phases.items())
        + f"; load average {os.getloadavg()[0]:.1f}"
    )
    print("| process | peak RSS MB | peak PSS MB |")
    print("|---|---:|---:|")
    for name in sorted(sampler.peak_rss):
        print(f"| {name} | {sampler.peak_rss[name] / mb:.0f} | {sampler.peak_pss[name] / mb:.0f} |")
    print(
        f"| **all pmd processes together (peak of the sum)** | **{sampler.peak_sum_rss / mb:.0f}** | "
        f"**{sampler.peak_sum_pss / mb:.0f}** |"
    )
    print(
        f"| all pmd processes but the child making the int8 copy (once per model file) | "
        f"{sampler.peak_sum_serving / mb:.0f} | |"
    )
    if sampler.copy_hwm:
        child = max(sampler.copy_hwm.values())
        print(f"| the child making the int8 copy, its own peak (VmHWM) | {child / mb:.0f} | |")
        print(
            f"| all pmd processes while the copy is made: the others' largest sum + the child's peak "
            f"(a bound from above) | {(sampler.others_while_copying + child) / mb:.0f} | |"
        )
    print(
        f"the largest sum, {sampler.peak_at:.0f} s after the start: "
        + ", ".join(f"{name} {rss / mb:.0f}" for name, rss in sorted(sampler.at_peak.items()))
        + " MB RSS"
    )
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
