"""The reader pack's lean Qwen2 decoder against transformers' ``Qwen2ForCausalLM`` forward on
the real GGUF, in float32: the same tokens for N NQ-open questions.

Both generators share one model, loaded by transformers from the GGUF (``gguf_file=``, through
ragdesk's converted copy of exactly that load); one answers through ragdesk's lean decoder,
the other through transformers' forward with its own cache (``lean_decoder=False``). Passages
are the starter snapshot's dense top K for each question.

    RAGDESK_DATA_DIR=... python -m bench.reader_parity ../shared/data/nq-open-dev.jsonl \\
        --questions 20 --docs 1 --modes together --out bench/results/reader.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any


def _questions(path: Path, n: int) -> list[str]:
    out = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                out.append(str(json.loads(line)["question"]))
            if len(out) == n:
                break
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("questions", type=Path, help="NQ-open JSONL (question, answer)")
    p.add_argument("--questions", dest="n", type=int, default=20)
    p.add_argument("--docs", type=int, default=2, help="passages per question")
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--modes", nargs="+", default=["together"])
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)

    from ragdesk.core.app import AppContext
    from ragdesk.core.engine import Engine
    from ragdesk.core.engine.generators import CausalLMGenerator
    from ragdesk.core.engine.qwen2_decoder import Qwen2Decoder
    from ragdesk.core.models import loading
    from ragdesk.core.models.packs import get_pack
    from ragdesk.core.models.reader import READER
    from ragdesk.core.snapshots import SnapshotLibrary
    from ragdesk.core.types import Hit

    ctx = AppContext(os.environ.get("RAGDESK_DATA_DIR"))
    pack = get_pack(ctx.catalog, READER, ctx.data)
    t0 = time.perf_counter()
    lean = loading.load_generator(pack.generator, precision="float32")
    assert isinstance(lean, CausalLMGenerator)
    assert isinstance(lean.lean_decoder, Qwen2Decoder), "the reader must take the lean path"
    ref = CausalLMGenerator(lean.model, lean.tokenizer, lean.name, lean_decoder=False)
    load_s = time.perf_counter() - t0
    qenc = loading.load_question_encoder(pack.question_encoder)
    library = SnapshotLibrary(ctx.data, ctx.catalog)
    engines = {"lean": Engine(qenc, lean, library=library),
               "transformers": Engine(qenc, ref, library=library)}
    rows: list[dict[str, Any]] = []
    for q in _questions(args.questions, args.n):
        docs = [Hit(d.id, d.title, d.text, d.score)
                for d in engines["lean"].retrieve(q, args.docs)]
        for mode in args.modes:
            row: dict[str, Any] = {"question": q, "mode": mode}
            for name, engine in engines.items():
                t = time.perf_counter()
                ans = engine.answer_from_docs(q, docs, mode=mode,
                                              max_new_tokens=args.max_new_tokens)
                row[name] = {"text": ans.text, "token_ids": ans.token_ids,
                             "logprob": ans.logprob, "seconds": time.perf_counter() - t}
            row["equal"] = row["lean"]["token_ids"] == row["transformers"]["token_ids"]
            row["logprob_diff"] = abs(row["lean"]["logprob"] - row["transformers"]["logprob"])
            rows.append(row)
            print(f"{'=' if row['equal'] else 'DIFF'} [{mode}] {q!r}: "
                  f"{row['lean']['text']!r} / {row['transformers']['text']!r} "
                  f"({row['lean']['seconds']:.1f} s / {row['transformers']['seconds']:.1f} s)",
                  flush=True)
    summary = {
        "questions": args.n, "docs": args.docs, "modes": args.modes, "precision": "float32",
        "equal": sum(r["equal"] for r in rows), "compared": len(rows),
        "max_logprob_diff": max((r["logprob_diff"] for r in rows), default=0.0),
        "load_s": load_s, "machine": f"{platform.machine()} {os.cpu_count()} CPUs",
        "load_average": os.getloadavg(), "rows": rows,
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(summary, indent=1, ensure_ascii=False), encoding="utf-8")
    library.close()
    ctx.close()
    return 0 if summary["equal"] == summary["compared"] else 1


if __name__ == "__main__":
    sys.exit(main())
