"""``ragdesk eval`` on NQ-open dev against the starter snapshot: record runs, then write the
``eval`` section of ``docs/benchmarks.md``.

Unlike the other bench scripts this one measures the command a user runs, not a reference
against ragdesk: each run is ``ragdesk eval ... --json`` in a subprocess, timed from the
outside, with the load average before and after (the machine is shared, so timings are noisy).

    # one record per run (the command's JSON summary, wall time, load average, machine)
    python -m bench.eval_results record retrieval --runs DIR -- \\
        eval ../shared/data/nq-open-dev.jsonl --snapshot vital-articles --retrieval-only
    python -m bench.eval_results record e2e --runs DIR -- \\
        eval ../shared/data/nq-open-dev.jsonl --snapshot vital-articles --limit 200 \\
        --out DIR/e2e.jsonl
    # bench/results/eval.{json,md} from the records in DIR
    python -m bench.eval_results report --runs DIR

``--json`` is added to the recorded command when missing; ``--data-dir`` comes from
``RAGDESK_DATA_DIR`` like the CLI's. The report shows the retrieval-only run ("retrieval"), the
end-to-end run ("e2e", with a few of its per-question predictions when it was run with
``--out``), and any other records in DIR as extra rows.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import REPO, machine, machine_line, md_table, write_results

KS = ("1", "5", "20", "100")
EXAMPLES = 4  # right and wrong predictions shown from the end-to-end run


def _load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def record(name: str, runs: Path, args: list[str]) -> Path:
    if "--json" not in args:
        args = [*args, "--json"]
    cmd = [sys.executable, "-m", "ragdesk", *args]
    info = machine()
    load_before = _load()
    t0 = time.perf_counter()
    # stderr (progress bar, errors) passes through; stdout is the JSON summary.
    proc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"ragdesk eval failed with exit status {proc.returncode}")
    rec = {"name": name, "command": "ragdesk " + shlex.join(args), "wall_s": round(wall, 1),
           "load_average_before": load_before, "load_average_after": _load(),
           "machine": info, "summary": json.loads(proc.stdout)}
    runs.mkdir(parents=True, exist_ok=True)
    path = runs / f"{name}.json"
    path.write_text(json.dumps(rec, indent=2) + "\n", encoding="utf-8")
    print(f"{name}: {wall:.1f} s -> {path}")
    return path


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def _row(label: str, s: dict[str, Any], n: int | None = None) -> list[str]:
    return [label, f"{n if n is not None else s['n']:,}", _pct(s.get("em")), _pct(s.get("f1")),
            *(_pct(s["top_k_accuracy"].get(k)) for k in KS)]


def _timing_line(rec: dict[str, Any]) -> str:
    t = rec["summary"]["timings"]
    parts = [f"wall {rec['wall_s']:.0f} s (model loading included)",
             f"retrieval {t['retrieval_per_question_ms']:.0f} ms/question "
             f"(batched question encoding {t['question_encoding_s']:.0f} s, "
             f"search {t['search_s']:.0f} s)"]
    if "answer_per_question_ms" in t:
        parts.append(f"answering {t['answer_per_question_ms'] / 1000:.2f} s/question")
    before, after = rec.get("load_average_before"), rec.get("load_average_after")
    if before and after:
        parts.append(f"load average (1/5/15 min) {before} before, {after} after")
    return "; ".join(parts) + "."


def _examples(out_file: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in out_file.read_text(encoding="utf-8").splitlines()
            if line.strip()]
    right = [r for r in rows if r.get("em")][:EXAMPLES]
    wrong = [r for r in rows if r.get("em") == 0.0][:EXAMPLES]
    return right + wrong


def _out_path(command: str) -> Path | None:
    args = shlex.split(command)
    if "--out" in args:
        p = Path(args[args.index("--out") + 1])
        return p if p.is_file() else None
    return None


def report(runs: Path, notes: list[str] | None = None) -> tuple[Path, Path]:
    recs = {p.stem: json.loads(p.read_text(encoding="utf-8"))
            for p in sorted(runs.glob("*.json"))}
    if "retrieval" not in recs:
        raise SystemExit(f"No retrieval record in {runs}; run `record retrieval` first.")
    order = ["retrieval", "e2e", *sorted(k for k in recs if k not in ("retrieval", "e2e"))]
    ret = recs["retrieval"]
    cfg = ret["summary"]["config"]
    data: dict[str, Any] = {"machine": ret["machine"], "runs": {}, "notes": list(notes or [])}
    md = ["# Evaluation: `ragdesk eval` on NQ-open dev", "",
          f"Snapshot {cfg['snapshot']!r} ({cfg['passages']:,} passages, Vital Articles "
          f"lead sections in 100-word passages), pack {cfg['pack']!r} (all-MiniLM-L6-v2 "
          "question encoder; Gemma 3 270M generator from its Q4_K_M GGUF, run in float32), "
          "dense retriever. Top-k accuracy is DPR's: a hit when one of the top k passages "
          "contains a normalized gold answer as whole words. *Answerable*: the questions "
          "with a gold answer somewhere in the snapshot; on a 12k-passage snapshot these "
          "are the honest denominator. EM and F1 use the SQuAD normalization.", "",
          machine_line(ret["machine"]), ""]
    headers = ["run", "questions", "EM %", "F1 %", *(f"top-{k} %" for k in KS)]
    rows = []
    for name in order:
        if name not in recs:
            continue
        rec = recs[name]
        s = rec["summary"]
        data["runs"][name] = {k: rec[k] for k in ("command", "wall_s", "load_average_before",
                                                   "load_average_after")}
        data["runs"][name]["summary"] = s
        rows.append(_row(f"{name}: all", s))
        if s.get("answerable"):
            rows.append(_row(f"{name}: answerable", s["answerable"]))
    md += [md_table(headers, rows), ""]
    top20 = ret["summary"]["answerable"]["top_k_accuracy"]["20"]
    md += [f"The retrieval-only run's dense top-20 accuracy on the answerable questions, "
           f"{top20:.3f}, is the figure the index and retrieval sections measure with exact "
           "search outside the CLI (0.458).", ""]
    for name in order:
        if name not in recs:
            continue
        rec = recs[name]
        md += [f"**{name}**: `{rec['command']}`  ", _timing_line(rec), ""]
    for note in notes or []:
        md += [note, ""]
    e2e = recs.get("e2e")
    out = _out_path(e2e["command"]) if e2e else None
    if out is not None:
        ex = _examples(out)
        data["runs"]["e2e"]["examples"] = [
            {k: r[k] for k in ("line", "question", "answers", "prediction", "em", "f1",
                               "first_hit_rank")} for r in ex]
        md += ["Some end-to-end predictions (from `--out`; *first hit*: rank of the first "
               "retrieved passage holding a gold answer):", ""]
        md.append(md_table(
            ["question", "gold", "prediction", "EM", "first hit"],
            [[r["question"], " / ".join(r["answers"][:3]), repr(r["prediction"]),
              f"{r['em']:.0f}", "-" if r["first_hit_rank"] is None
              else str(r["first_hit_rank"])] for r in ex]))
        md.append("")
    return write_results("eval", data, "\n".join(md))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="run `ragdesk ARGS --json` and keep its record")
    r.add_argument("name")
    r.add_argument("--runs", type=Path, required=True, metavar="DIR")
    p = sub.add_parser("report", help="write bench/results/eval.{json,md}")
    p.add_argument("--runs", type=Path, required=True, metavar="DIR")
    p.add_argument("--note", action="append", metavar="TEXT",
                   help="a paragraph to add under the runs (repeatable)")
    argv = sys.argv[1:] if argv is None else argv
    # Everything after "--" is the ragdesk command line, kept away from argparse.
    cut = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:cut])
    if a.cmd == "record":
        if cut == len(argv):
            ap.error("record needs the ragdesk arguments after --")
        record(a.name, a.runs, argv[cut + 1:])
    else:
        for path in report(a.runs, a.note):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
