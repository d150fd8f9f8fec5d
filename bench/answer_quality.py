"""Right answers from the starter pack: exact match of ``ragdesk eval`` with each answer
ingredient alone and together (retrieval temperature τ, answer style, grounded decoding,
retriever, K), on the NQ-open dev questions among the first 1,000 lines that the starter
snapshot can answer at all.

Like ``bench.eval_results`` this measures the command a user runs: each configuration is one
``ragdesk eval ... --json`` subprocess, recorded with its wall time and load average. A full
ablation over the 422 answerable questions takes hours on a shared 2-core machine, so the
ablation runs on a fixed subsample (every 4th answerable question); the chosen configuration
also runs on all of them.

    python -m bench.answer_quality subset              # question files under bench/out/
    python -m bench.answer_quality run NAME [--full] -- [eval options]
    python -m bench.answer_quality report              # bench/results/answers.{json,md}

The hybrid retriever's re-ranker was fitted on the odd lines of NQ-open dev (see
``ragdesk.core.retrieval.rerank``), half of these questions: its rows are marked.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

from bench import NQ_DEV, REPO, machine_line, md_table, write_results
from bench.eval_results import record

OUT = REPO / "bench" / "out"
RUNS = REPO / "bench" / "results" / "answer-runs"
LINES = 1000
EVERY = 8
FULL_FILE = OUT / "nq-dev-answerable-first1000.jsonl"
SUBSET_FILE = OUT / f"nq-dev-answerable-first1000-every{EVERY}.jsonl"


def subset() -> None:
    """Write the answerable questions among the first LINES lines, and every EVERY-th one."""
    OUT.mkdir(parents=True, exist_ok=True)
    per_q = OUT / "retrieval-first1000.jsonl"
    cmd = [sys.executable, "-m", "ragdesk", "eval", str(NQ_DEV), "--limit", str(LINES),
           "--retrieval-only", "--out", str(per_q), "--json"]
    subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    rows = [json.loads(line) for line in per_q.read_text(encoding="utf-8").splitlines()]
    answerable = [r for r in rows if r["answerable"]]
    with open(FULL_FILE, "w", encoding="utf-8") as fh:
        for r in answerable:
            fh.write(json.dumps({"question": r["question"], "answer": r["answers"],
                                 "line": r["line"]}) + "\n")
    with open(SUBSET_FILE, "w", encoding="utf-8") as fh:
        for r in answerable[::EVERY]:
            fh.write(json.dumps({"question": r["question"], "answer": r["answers"],
                                 "line": r["line"]}) + "\n")
    print(f"{len(answerable)} answerable of {len(rows)}: {FULL_FILE}; "
          f"{len(answerable[::EVERY])} in {SUBSET_FILE}")


def run(name: str, full: bool, extra: list[str]) -> None:
    questions = FULL_FILE if full else SUBSET_FILE
    if not questions.is_file():
        raise SystemExit("Run `python -m bench.answer_quality subset` first.")
    out = OUT / f"answers-{name}.jsonl"
    record(name, RUNS, ["eval", str(questions), "--out", str(out), *extra])


def _before_prompt(self: Any, question: str, passage: Any, style: str = "short") -> str:
    """The causal prompt before this round (kept here as the reference): the passage and the
    question as typed, no examples, no instruction (the starter Gemma has no chat template)."""
    body = f"{passage.title}\n{passage.text}".strip()
    return f"{body}\n\nQuestion: {question}\nAnswer:"


def run_before(name: str, skip: int, limit: int | None, precision: str) -> None:
    """Yesterday's answers on the same questions, in this process: the old prompt, τ = 1, no
    question recasing, no n-gram blocking, no grounding (the decoder itself is unchanged and
    tested equal to transformers)."""
    import dataclasses
    import time

    import ragdesk
    from bench import machine
    from ragdesk.core.engine import generators
    from ragdesk.core.evaluation.questions import read_questions
    from ragdesk.core.evaluation.runner import evaluate
    from ragdesk.core.progress import terminal_printer

    generators.CausalLMGenerator.prompt_text = _before_prompt  # type: ignore[method-assign]
    generators.normalize_question = lambda q, passages=(): q  # type: ignore[assignment]
    engine = ragdesk.load_engine(data_dir=os.environ.get("RAGDESK_DATA_DIR"))
    from ragdesk.core.models import load_generator

    engine.generator = load_generator(engine.generator.name, precision=precision)
    gen = engine.generator
    gen.settings = dataclasses.replace(gen.settings, no_repeat_ngram_size=0)
    snapshot = engine.snapshot_index()
    qs = read_questions(FULL_FILE)[skip:]
    qs = qs[:limit] if limit is not None else qs
    t0 = time.perf_counter()
    load_before = [round(x, 2) for x in os.getloadavg()]
    report = evaluate(
        qs, encoder=engine.question_encoder,
        retrieve_batch=lambda q, vecs, k: snapshot.search(vecs, k), passages=snapshot,
        answer=lambda q: engine.answer(q, mode="token", n_docs=5, max_new_tokens=16,
                                       grounded=False, temperature=1.0),
        cite=5, config={"questions": str(FULL_FILE), "snapshot": snapshot.name,
                        "passages": int(snapshot.size), "pack": "starter",
                        "retriever": "dense", "n_docs": 5, "mode": "token",
                        "style": "before (plain prompt)", "grounded": False,
                        "temperature": 1.0, "precision": precision, "skip": skip,
                        "limit": limit}, progress=terminal_printer())
    rec = {"name": name, "command": f"python -m bench.answer_quality before {name} "
                                    f"--skip {skip} --limit {limit} --precision {precision}",
           "wall_s": round(time.perf_counter() - t0, 1), "load_average_before": load_before,
           "load_average_after": [round(x, 2) for x in os.getloadavg()],
           "machine": machine(), "summary": report.to_json()}
    RUNS.mkdir(parents=True, exist_ok=True)
    (RUNS / f"{name}.json").write_text(json.dumps(rec, indent=2) + "\n", encoding="utf-8")


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def _num(v: float | None, fmt: str = ".3f") -> str:
    return "-" if v is None else format(v, fmt)


def _combine(parts: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """One record from runs over disjoint slices of the same question file (``--skip`` /
    ``--limit`` shards run side by side): question-weighted means, summed answer time."""
    n = sum(p["summary"]["n"] for p in parts)

    def mean(key: str) -> float | None:
        vals = [(p["summary"].get(key), p["summary"]["n"]) for p in parts]
        if any(v is None for v, _ in vals):
            return None
        weighted: float = sum(float(v) * w for v, w in vals) / n
        return weighted

    first = parts[0]
    s = dict(first["summary"])
    s["n"] = n
    for key in ("em", "f1", "mean_top1_prob", "mean_token_entropy"):
        s[key] = mean(key)
    s["top_k_accuracy"] = {
        k: sum((p["summary"]["top_k_accuracy"][k] or 0.0) * p["summary"]["n"] for p in parts) / n
        for k in first["summary"]["top_k_accuracy"]}
    per_q = [p["summary"]["timings"].get("answer_per_question_ms", 0.0) for p in parts]
    s["timings"] = {**first["summary"]["timings"],
                    "answer_per_question_ms": sum(per_q) / len(per_q)}
    return {**first, "name": name, "summary": s,
            "command": " ; ".join(p["command"] for p in parts),
            "wall_s": max(p["wall_s"] for p in parts)}


def _records() -> list[dict[str, Any]]:
    recs = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(RUNS.glob("*.json"))]
    shards: dict[str, list[dict[str, Any]]] = {}
    out = []
    for r in recs:
        if "-part" in r["name"]:
            shards.setdefault(r["name"].split("-part")[0], []).append(r)
        else:
            out.append(r)
    out += [_combine(parts, f"{name} (full)") for name, parts in shards.items()]
    return sorted(out, key=lambda r: str(r["name"]))


def report(notes: list[str] | None = None) -> None:
    recs = _records()
    if not recs:
        raise SystemExit(f"No runs in {RUNS}.")
    # names start with a number that orders the table (01-baseline, 02-temperature, ...)
    headers = ["configuration", "questions", "τ", "style", "grounded", "retriever", "K",
               "EM %", "F1 %", "top-K hit % (ceiling)", "mean top-1 p(z|x)",
               "mean source entropy", "s/question", "load before"]
    rows = []
    data: dict[str, Any] = {"runs": {}}
    for rec in recs:
        s = rec["summary"]
        c = s["config"]
        k = str(c["n_docs"])
        mark = " †" if c["retriever"] == "hybrid" else ""
        rows.append([
            rec["name"] + mark, f"{s['n']:,}", _num(c.get("temperature"), ".3g"),
            str(c.get("style")), "yes" if c.get("grounded") else "no", c["retriever"], k,
            _pct(s["em"]), _pct(s["f1"]), _pct(s["top_k_accuracy"].get(k)),
            _num(s.get("mean_top1_prob")), _num(s.get("mean_token_entropy")),
            _num(s["timings"].get("answer_per_question_ms", 0) / 1000, ".1f"),
            str((rec.get("load_average_before") or ["?"])[0])])
        data["runs"][rec["name"]] = {"command": rec["command"], "summary": s,
                                     "wall_s": rec["wall_s"],
                                     "load_average_before": rec.get("load_average_before")}
    md = ["# Right answers from the starter pack", "",
          "`ragdesk eval` end to end (RAG-Token, greedy) with the starter pack (all-MiniLM-L6-v2 "
          "over the 12,324 Vital Articles passages, Gemma 3 270M) on the NQ-open dev questions "
          f"among the first {LINES:,} lines that the snapshot can answer at all (a gold answer "
          "occurs in some passage). EM uses the SQuAD normalization. The *ceiling* is the "
          "share of questions with an answer among the K passages the generator reads. "
          "*Source entropy*: the mean entropy (nats) of the answer tokens' p(z | x, y_i); "
          "ln 5 = 1.609 is no information.", "",
          f"Ablation rows run on every {EVERY}th answerable question; rows marked *full* on "
          "all of them. † The hybrid re-ranker was fitted on the odd lines of NQ-open dev, "
          "about half of these questions.", "",
          machine_line(recs[0]["machine"]), "", md_table(headers, rows), ""]
    for note in notes or []:
        md += [note, ""]
    data["notes"] = list(notes or [])
    write_results("answers", data, "\n".join(md))
    print("\n".join(md))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.answer_quality")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("subset")
    r = sub.add_parser("run")
    r.add_argument("name")
    r.add_argument("--full", action="store_true")
    r.add_argument("extra", nargs=argparse.REMAINDER)
    b = sub.add_parser("before")
    b.add_argument("name")
    b.add_argument("--skip", type=int, default=0)
    b.add_argument("--limit", type=int)
    b.add_argument("--precision", default="bfloat16")
    rp = sub.add_parser("report")
    rp.add_argument("--note", action="append", default=[],
                    help="a paragraph to add under the table (what the runs showed)")
    a = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if a.cmd == "subset":
        subset()
    elif a.cmd == "before":
        run_before(a.name, a.skip, a.limit, a.precision)
    elif a.cmd == "run":
        # REMAINDER also swallows --full when it follows the name
        extra = [x for x in a.extra if x not in ("--", "--full")]
        run(a.name, a.full or "--full" in a.extra, extra)
    else:
        report(a.note)


if __name__ == "__main__":
    main()
