"""Fit the confidence model ragdesk ships for a pack, from an `ragdesk eval --out` file.

Reproduces ragdesk/resources/confidence/starter.json:

    ragdesk eval ../shared/data/nq-open-dev.jsonl --skip 1000 --out fit.jsonl
    python scripts/fit_confidence.py fit.jsonl --out ragdesk/resources/confidence/starter.json

and the reader pack's (whose answers skip the closed-book pass, see --without-closed-book; its
rows also hold each question's answer from the reader's memory, which give the model its memory
part, see ragdesk.core.evaluation.confidence_fit):

    ragdesk eval ../shared/data/nq-open-dev.jsonl --pack reader-1.5b --skip 1000 \
        --only-model-features --out fit.jsonl
    python scripts/fit_confidence.py fit.jsonl --generator qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
        --mode together --without-closed-book --out ragdesk/resources/confidence/reader-1.5b.json

Lines 1-1,000 of the NQ-open dev file are for evaluation only: rows from them are refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ragdesk.core.confidence.features import CLOSED_BOOK, FEATURES
from ragdesk.core.confidence.store import generator_key
from ragdesk.core.evaluation.confidence_fit import fit_on_results
from ragdesk.core.models.starter import GGUF_NAME
from ragdesk.core.options import MODES
from ragdesk.core.starter_encoder import ENCODER_ID

FIRST_FITTING_LINE = 1001


def _share(x: object) -> str:
    return f"{x:.3f}" if isinstance(x, float) else "unknown"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", type=Path, help="an `ragdesk eval --out` JSONL file")
    p.add_argument("--out", type=Path, required=True, help="the model file to write")
    p.add_argument("--generator", default=GGUF_NAME, help="the generator the answers came from")
    p.add_argument("--encoder", default=ENCODER_ID, help="the snapshot's encoder id")
    p.add_argument("--mode", choices=MODES, default="token",
                   help="the reading mode the answers were read in (the pack's default; only "
                        "answers read so get a confidence from the model; default: token)")
    p.add_argument("--without-closed-book", action="store_true",
                   help="leave out the features of the answer read without passages: answers "
                        "then skip that pass (it costs the reader pack a quarter of an answer)")
    args = p.parse_args(argv)
    names = [n for n in FEATURES if not (args.without_closed_book and n in CLOSED_BOOK)]
    rows = [json.loads(line) for line in args.results.read_text(encoding="utf-8").splitlines()
            if line.strip()]
    early = [r["line"] for r in rows if int(r["line"]) < FIRST_FITTING_LINE]
    if early:
        print(f"refused: {len(early)} rows from lines 1-1,000 (evaluation only), e.g. line "
              f"{early[0]}", file=sys.stderr)
        return 2
    lines = f"{min(r['line'] for r in rows)}-{max(r['line'] for r in rows)}"
    try:
        model = fit_on_results(rows, source=f"NQ-open dev lines {lines}", names=names,
                               modes=(args.mode,))
    except ValueError as exc:
        print(f"cannot fit: {exc}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"generator": generator_key(args.generator), "encoder": args.encoder,
           "model": model.to_json()}
    args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    memory = model.fitted_on.get("with_memory")
    measured = model.measured()
    cv, right = measured["cross_validated"], measured["right"]
    print(f"{args.out}: {model.fitted_on['questions']} questions, {right} right"
          + (f" ({memory['from_memory']} answers from memory, kept part: {memory['kept_part']})"
             if memory else "")
          + f"; threshold {model.threshold:.3f}; cross-validated AUROC {cv['auroc']:.3f}, "
          f"ECE {cv['ece']:.3f}, given {cv['given']} ({cv['given_right_share']:.3f} right), "
          f"right kept {cv['right_kept_share']:.3f}, unanswerable abstaining "
          f"{_share(cv['unanswerable_abstain_share'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
