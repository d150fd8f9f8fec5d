"""`ragdesk ask` wall time against the engine's own answer time, with the starter pack.

Issue 16's target: the command's wall time (model loading included) at most 1.5x the time the
engine itself spends answering. Two ways of running the command, alternated question by
question on a warm file cache:

* alone: `ask` loads the question encoder and the generator itself (RAGDESK_NO_SERVER=1);
* with a server: `ragdesk serve` runs on the same data directory and `ask` hands it the
  question (the server started once, before the rounds; its start-up is reported apart).

The engine's answer time is the answer's own timings (retrieval, prompts, decoding) as the
JSON output reports them; its model loading is the JSON's ``load_s`` (question encoder and
generator, as `ask` itself timed them; nothing through a server). Two ratios: wall / answer,
and wall / (loading + answer), which is what the command adds around the engine's work
(interpreter start, imports, argument checks, opening the snapshot, printing).

    RAGDESK_DATA_DIR=/path/to/data python -m bench.ask_wall_bench [--rounds 2]
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
from typing import Any

from bench import machine, machine_line, md_table, write_results

QUESTIONS = ["who painted the mona lisa", "who wrote the novel pride and prejudice",
             "when did apollo 11 land on the moon", "what is the capital of senegal",
             "who discovered penicillin"]
PORT = 8797


def _ask(question: str, env: dict[str, str]) -> tuple[float, float, float]:
    """(wall seconds, the engine's answer seconds, its model loading seconds: 0 through a
    server) of one `ragdesk ask --json`."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "ragdesk", "ask", question, "--json"],
                         env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    got = json.loads(out.stdout)
    t = got["timings"]
    loading = sum(float(v) for v in (got.get("load_s") or {}).values())
    return (wall, sum(float(t.get(k, 0.0)) for k in ("retrieve_s", "encode_s", "decode_s")),
            loading)


def _start_server(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "ragdesk", "serve", "--port", str(PORT)],
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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    base = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    alone_env = {**base, "RAGDESK_NO_SERVER": "1"}
    load_before = os.getloadavg()[0]
    server, server_start = _start_server(base)
    rows: dict[str, list[tuple[float, float, float]]] = {"alone": [], "server": []}
    try:
        for _ in range(args.rounds):
            for q in QUESTIONS:
                rows["alone"].append(_ask(q, alone_env))
                rows["server"].append(_ask(q, base))
                print(f"{q!r}: alone {rows['alone'][-1]}, server {rows['server'][-1]}",
                      flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
    summary: dict[str, Any] = {}
    for way, runs in rows.items():
        summary[way] = {"wall_median_s": statistics.median(w for w, _, _ in runs),
                        "answer_median_s": statistics.median(a for _, a, _ in runs),
                        "load_median_s": statistics.median(lo for _, _, lo in runs),
                        "ratio_median": statistics.median(w / a for w, a, _ in runs),
                        "ratio_loading_included_median": statistics.median(
                            w / (a + lo) for w, a, lo in runs)}
    m = machine()
    data = {"summary": summary, "server_start_s": server_start, "runs": rows,
            "questions": QUESTIONS, "rounds": args.rounds, "load_before": load_before,
            "load_after": os.getloadavg()[0], "machine": m}
    md = ("# `ragdesk ask` wall time against the engine's answer time (starter pack)\n\n"
          f"{machine_line(m)}; load average {load_before:.2f} before, "
          f"{data['load_after']:.2f} after; {len(QUESTIONS)} questions x {args.rounds} rounds, "
          "alternating.\n\n" + md_table(
              ["ask", "wall (median)", "engine's answer (median)",
               "engine's model loading (median)", "wall / answer (median)",
               "wall / (loading + answer) (median)"],
              [[way, f"{s['wall_median_s']:.2f} s", f"{s['answer_median_s']:.2f} s",
                f"{s['load_median_s']:.2f} s", f"{s['ratio_median']:.2f}x",
                f"{s['ratio_loading_included_median']:.2f}x"]
               for way, s in summary.items()]) +
          f"\n\n`ragdesk serve` was ready {server_start:.1f} s after it started (once).\n")
    write_results("ask_wall", data, md)
    print(md)


if __name__ == "__main__":
    main()
