"""Re-score an `ragdesk eval --out` file with a confidence model: the figures `eval` prints.

The confidence is a function of the answer's features, which `--out` keeps; an evaluation run
before a model was fitted is scored here exactly as `eval` would have scored it with the model
(same predictions, same features, same threshold), without answering every question again.
Rows that hold the reader's answer from memory too are scored on the candidate the model
then keeps, as the engine chooses:

    python scripts/score_confidence.py eval.jsonl ragdesk/resources/confidence/starter.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ragdesk.core.confidence import ConfidenceModel
from ragdesk.core.evaluation.confidence_fit import rescore
from ragdesk.core.evaluation.selective import selective_summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", type=Path, help="an `ragdesk eval --out` JSONL file")
    p.add_argument("model", type=Path, help="a model file (resources/confidence/*.json)")
    p.add_argument("--sample", type=int, default=0, metavar="N",
                   help="also print N answers with their confidence, to read")
    args = p.parse_args(argv)
    doc = json.loads(args.model.read_text(encoding="utf-8"))
    model = ConfidenceModel.from_json(doc.get("model", doc))
    rows = [json.loads(line) for line in args.results.read_text(encoding="utf-8").splitlines()
            if line.strip()]
    rows = [r for r in rows if r.get("features")]
    scored = [rescore(model, r) for r in rows]
    conf = [c for c, _ in scored]
    right = [ok for _, ok in scored]
    answerable = [r["answerable"] for r in rows]
    abstained = [model.abstains(c) for c in conf]
    out = {"all": selective_summary(conf, right, answerable, abstained),
           "answerable": selective_summary([c for c, a in zip(conf, answerable, strict=True) if a],
                                           [r for r, a in zip(right, answerable, strict=True) if a],
                                           [a for a in answerable if a],
                                           [m for m, a in zip(abstained, answerable, strict=True)
                                            if a]),
           "em_answerable": (sum(r for r, a in zip(right, answerable, strict=True) if a) /
                             max(1, sum(1 for a in answerable if a))),
           "threshold": model.threshold}
    print(json.dumps(out, indent=1))
    for r, c, ok in list(zip(rows, conf, right, strict=True))[:args.sample]:
        mark = "RIGHT" if ok else "wrong"
        print(f"{c:.3f} {'abstain' if model.abstains(c) else 'given  '} {mark} "
              f"{r['question']!r} -> {r['prediction']!r} (gold {r['answers'][:2]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
