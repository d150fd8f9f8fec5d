"""Fit the part of a pack's confidence model that judges the reader's answers from memory.

From `ragdesk eval --out` rows of the pack's answers from the passages (fitting lines only),
the answers from memory are read with the engine's own code (``--answer``, in as many
processes as wanted), then one model is fitted on them and written beside the passages' model,
with the threshold chosen again on what the engine then keeps (cross-validated):

    python scripts/fit_memory.py answer fit.jsonl --pack reader-1.5b --out mem.jsonl
    python scripts/fit_memory.py fit fit.jsonl --memory mem.jsonl \\
        --model ragdesk/resources/confidence/reader-1.5b.json --out reader-1.5b.json

Lines 1-1,000 of the NQ-open dev file are for evaluation only: rows from them are refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

FIRST_FITTING_LINE = 1001


def _rows(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    early = [r["line"] for r in rows if int(r["line"]) < FIRST_FITTING_LINE]
    if early:
        raise SystemExit(f"refused: rows from lines 1-1,000 (evaluation only), e.g. {early[0]}")
    return rows


def answer(args: argparse.Namespace) -> int:
    from ragdesk.core.confidence.memory import memory_features
    from ragdesk.core.engine.memory_answer import memory_answer
    from ragdesk.core.engine.request import AnswerRequest
    from ragdesk.core.options import DEFAULT_OPTIONS
    from ragdesk.core.posterior import temperature_of
    from ragdesk.core.session import load_engine
    from ragdesk.core.types import Hit

    engine = load_engine(pack=args.pack)
    index = engine.snapshot_index()
    options = DEFAULT_OPTIONS.__class__(**{**DEFAULT_OPTIONS.__dict__, "mode": args.mode})
    with args.out.open("w", encoding="utf-8") as out:
        for r in _rows(args.results):
            docs = engine.retrieve(r["question"], options.n_docs, snapshot=index)
            hits = [Hit(d.id, d.title, d.text, d.score) for d in docs]
            req = AnswerRequest.checked(r["question"], options, engine.generator).on(
                index.name, temperature_of(index))
            mem = memory_answer(engine.generator, req, hits)
            feats = memory_features(mem, r["prediction"] or "", float(r["confidence"]))
            out.write(json.dumps({"line": r["line"], "memory": mem.text, "features": feats})
                      + "\n")
            out.flush()
    engine.close()
    return 0


def fit(args: argparse.Namespace) -> int:
    from ragdesk.core.confidence.memory import MEMORY_FEATURES
    from ragdesk.core.confidence.model import ConfidenceModel, fit_confidence
    from ragdesk.core.evaluation.confidence_fit import FOLDS, L2, cross_validated
    from ragdesk.core.evaluation.metrics import exact_match
    from ragdesk.core.evaluation.selective import (
        auroc,
        choose_threshold,
        expected_calibration_error,
        given_figures,
    )

    passages = {r["line"]: r for r in _rows(args.results)}
    memory = {r["line"]: r for p in args.memory for r in _rows(p)}
    lines = sorted(set(passages) & set(memory))
    feats = [memory[n]["features"] for n in lines]
    mem_right = np.array([exact_match(memory[n]["memory"], passages[n]["answers"]) >= 1.0
                          for n in lines])
    cv = cross_validated(feats, mem_right, L2, FOLDS, MEMORY_FEATURES)
    p_passages = np.array([float(passages[n]["confidence"]) for n in lines])
    rt_right = np.array([float(passages[n]["em"]) >= 1.0 for n in lines])
    use = cv > p_passages
    final = np.where(use, cv, p_passages)
    right = np.where(use, mem_right, rt_right)
    answerable = [passages[n].get("answerable") for n in lines]
    threshold = choose_threshold(final.tolist(), right.tolist(), answerable)
    figures = given_figures((final >= threshold).tolist(), right.tolist(), answerable)
    shipped = json.loads(args.model.read_text(encoding="utf-8"))  # as in resources/confidence
    base = ConfidenceModel.from_json(shipped["model"])
    part = fit_confidence(feats, mem_right.tolist(), threshold=threshold, names=MEMORY_FEATURES,
                          fitted_on={"questions": len(lines), "right": int(mem_right.sum()),
                                     "auroc_cross_validated": auroc(cv.tolist(),
                                                                    mem_right.tolist())})
    fitted_on = dict(base.fitted_on)
    fitted_on["with_memory"] = {
        "source": f"{args.results.name} and {', '.join(p.name for p in args.memory)}",
        "lines": f"{lines[0]}-{lines[-1]}", "questions": len(lines),
        "from_memory": int(use.sum()), "right": int(right.sum()),
        "right_from_passages_alone": int(rt_right.sum()),
        "cross_validated": {"auroc": auroc(final.tolist(), right.tolist()),
                            "ece": expected_calibration_error(final.tolist(), right.tolist()),
                            **figures}}
    model = ConfidenceModel(base.names, base.mean, base.scale, base.weights, base.intercept,
                            float(threshold), fitted_on, base.modes, part)
    shipped["model"] = model.to_json()
    args.out.write_text(json.dumps(shipped, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(fitted_on["with_memory"], indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="step", required=True)
    a = sub.add_parser("answer", help="read the answers from memory for these rows")
    a.add_argument("results", type=Path)
    a.add_argument("--pack", default="reader-1.5b")
    a.add_argument("--mode", default="together")
    a.add_argument("--out", type=Path, required=True)
    f = sub.add_parser("fit", help="fit the memory part and choose the threshold again")
    f.add_argument("results", type=Path)
    f.add_argument("--memory", type=Path, nargs="+", required=True)
    f.add_argument("--model", type=Path, required=True, help="the passages' model (JSON)")
    f.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    return answer(args) if args.step == "answer" else fit(args)


if __name__ == "__main__":
    sys.exit(main())
