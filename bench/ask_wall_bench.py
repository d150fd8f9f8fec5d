"""`ragdesk ask` wall time against the engine's own answer time, with the starter pack.

The target: the command's wall time (model loading included) at most 3x the time the
engine itself spends answering. Two ways of running the command, alternated question by
question on a warm file cache:

* alone: `ask` loads the question encoder and the generator itself (RAGDESK_NO_SERVER=1);
* with a server: `ragdesk serve` runs on the same data directory and `ask` hands it the
  question (the server started once, before the rounds; its start-up is reported apart);
* ``--before DIR``: also alone, with the code of another checkout (``git worktree add DIR
  COMMIT``) first on the path, for a before/after comparison in the same rounds.

The engine's answer time is the answer's own timings (retrieval, prompts, decoding) as the
JSON output reports them; its model loading is the JSON's ``load_s`` (question encoder and
generator, as `ask` itself timed them; nothing through a server). Three ratios: wall /
answer; wall / (answer + its closed-book pass), the pass without passages that the answer's
confidence reads (JSON ``closed_book_s``), which is also the engine's work for this answer;
and wall / (loading + answer), which is what the command adds around the engine's work
(interpreter start, imports, argument checks, opening the snapshot, printing).

    RAGDESK_DATA_DIR=/path/to/data python -m bench.ask_wall_bench [--rounds 2]
        [--before DIR] [--no-server]

The 1-minute load average is recorded with every run (the machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench import REPO, machine, machine_line, md_table, write_results

QUESTIONS = ["who painted the mona lisa", "who wrote the novel pride and prejudice",
             "when did apollo 11 land on the moon", "what is the capital of senegal",
             "who discovered penicillin"]
PORT = 8797


def _ask(question: str, env: dict[str, str], cwd: Path = REPO, pack: str = "starter"
         ) -> tuple[float, float, float, float, float]:
    """(wall seconds, the engine's answer seconds, its model loading seconds: 0 through a
    server, the 1-minute load average as it started, the engine's whole answer in seconds:
    the answer and its confidence's closed-book pass) of one `ragdesk ask --json`."""
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "ragdesk", "ask", question, "--json",
                          "--pack", pack],
                         env=env, cwd=cwd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    got = json.loads(out.stdout)
    t = got["timings"]
    loading = sum(float(v) for v in (got.get("load_s") or {}).values())
    answer = sum(float(t.get(k, 0.0)) for k in ("retrieve_s", "encode_s", "decode_s"))
    return wall, answer, loading, load, answer + float(t.get("closed_book_s", 0.0))


def _start_server(env: dict[str, str], pack: str) -> tuple[subprocess.Popen[bytes], float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "ragdesk", "serve", "--port", str(PORT),
                             "--pack", pack],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/health", timeout=1) as r:
                if json.loads(r.read())["status"] == "ready":
                    return proc, time.perf_counter() - t0
        except OSError:
            pass
        if proc.poll() is not None:
            raise SystemExit("ragdesk serve exited before it was ready")
        time.sleep(0.5)


def _cwd(before: Path | None, way: str) -> Path:
    """Where `ask` runs: -m puts the working folder first on the path, so it picks the code."""
    return before if before is not None and "before" in way else REPO


def _ask_way(question: str, way: str, env: dict[str, str], args: argparse.Namespace
             ) -> tuple[float, float, float, float, float]:
    """:func:`_ask` as ``way`` runs it; through the server, the answer must have come from
    there (an `ask` that loads the models itself would time the other way twice)."""
    got = _ask(question, env, _cwd(args.before, way), args.pack)
    if way == "server" and got[2] > 0:
        raise SystemExit("`ask` loaded the models itself instead of asking the server "
                         f"serving {args.pack!r}")
    return got


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--before", type=Path, metavar="DIR",  # run from there: its code first
                    help="also run `ask` alone with this checkout's code (e.g. a git worktree "
                    "at an earlier commit), alternating with today's")
    ap.add_argument("--no-server", action="store_true", help="leave the server out")
    ap.add_argument("--pack", default="starter", help="the model pack asked (default: starter)")
    args = ap.parse_args(argv)
    # An installed ragdesk keeps its modules' compiled bytecode; a shell that forbids writing
    # it would have every start compile them again, which no user's `ask` does.
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    base["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", "2")
    envs = {"alone": {**base, "RAGDESK_NO_SERVER": "1"}}
    if args.before is not None:
        args.before = args.before.resolve()
        envs["alone, before"] = envs["alone"]
    if not args.no_server:
        envs["server"] = base
    load_before = os.getloadavg()[0]
    m = machine()  # before the rounds: its load average is the one at the start
    server, server_start = (_start_server(base, args.pack) if not args.no_server
                            else (None, None))
    rows: dict[str, list[tuple[float, float, float, float, float]]] = {
        way: [] for way in envs}
    try:
        for way, env in envs.items():  # untimed: the file cache and the bytecode warm
            _ask_way(QUESTIONS[0], way, env, args)
        for _ in range(args.rounds):
            for q in QUESTIONS:
                for way, env in envs.items():
                    rows[way].append(_ask_way(q, way, env, args))
                print(f"{q!r}: " + ", ".join(f"{way} {r[-1]}" for way, r in rows.items()),
                      flush=True)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    summary: dict[str, Any] = {}
    for way, runs in rows.items():
        summary[way] = {"wall_median_s": statistics.median(r[0] for r in runs),
                        "answer_median_s": statistics.median(r[1] for r in runs),
                        "load_median_s": statistics.median(r[2] for r in runs),
                        "ratio_median": statistics.median(r[0] / r[1] for r in runs),
                        "ratio_with_confidence_median": statistics.median(
                            r[0] / r[4] for r in runs),
                        "ratio_loading_included_median": statistics.median(
                            r[0] / (r[1] + r[2]) for r in runs),
                        "load_average_median": statistics.median(r[3] for r in runs)}
    data = {"summary": summary, "server_start_s": server_start, "runs": rows,
            "before": str(args.before) if args.before else None, "pack": args.pack,
            "questions": QUESTIONS, "rounds": args.rounds, "load_before": load_before,
            "load_after": os.getloadavg()[0], "machine": m}
    md = (f"# `ragdesk ask` wall time against the engine's answer time ({args.pack} pack)\n\n"
          f"{machine_line(m)} Load average {load_before:.2f} before, "
          f"{data['load_after']:.2f} after; {len(QUESTIONS)} questions x {args.rounds} rounds, "
          "alternating.\n\n" + md_table(
              ["ask", "wall (median)", "engine's answer (median)",
               "engine's model loading (median)", "wall / answer (median)",
               "wall / (answer + closed-book pass) (median)",
               "wall / (loading + answer) (median)", "load average (median)"],
              [[way, f"{s['wall_median_s']:.2f} s", f"{s['answer_median_s']:.2f} s",
                f"{s['load_median_s']:.2f} s", f"{s['ratio_median']:.2f}x",
                f"{s['ratio_with_confidence_median']:.2f}x",
                f"{s['ratio_loading_included_median']:.2f}x",
                f"{s['load_average_median']:.2f}"]
               for way, s in summary.items()]))
    if args.before is not None:
        commit = subprocess.run(["git", "-C", str(args.before), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip() or "?"
        md += (f"\n\n'alone, before': the code of {args.before} (commit {commit}), in the "
               "same rounds.\n")
    if server_start is not None:
        md += f"\n\n`ragdesk serve` was ready {server_start:.1f} s after it started (once).\n"
    write_results("ask_wall", data, md)
    print(md)


if __name__ == "__main__":
    main()
