"""`ragdesk eval QUESTIONS.jsonl ...`: exact match, F1 and retrieval accuracy on NQ-open style
questions."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragdesk.cli.common import (
    PRECISION_KEY,
    add_answer_options,
    grounded_setting,
    print_json,
    print_table,
    snapshot_pack_encoder,
)
from ragdesk.core.cpu import passive_openmp_waits
from ragdesk.core.errors import BadInputError
from ragdesk.core.evaluation.metrics import DEFAULT_KS
from ragdesk.core.options import DEFAULT_STYLE, resolve_grounded

if TYPE_CHECKING:
    from ragdesk.core.app import AppContext

RETRIEVERS = ("dense", "sparse", "hybrid")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "eval", help="measure exact match, F1 and retrieval accuracy on a question file",
        description="Reads NQ-open style questions (one {\"question\": ..., \"answer\": [...]} "
                    "object per line) and reports end-to-end exact match and token F1 (answers "
                    "lower-cased, punctuation and a/an/the removed), retrieval top-k accuracy "
                    "for k = 1, 5, 20, 100 (a hit when a passage contains a normalized gold "
                    "answer as whole words, DPR's convention), the same figures over the "
                    "questions answerable from the snapshot at all, and timings.")
    p.add_argument("questions", metavar="QUESTIONS.jsonl",
                   help="the question file, or - to read the questions from stdin")
    p.add_argument("--snapshot", metavar="NAME", help="snapshot to use (default: the active one)")
    p.add_argument("--pack", metavar="P", help="model pack (default: the chosen one)")
    p.add_argument("--mode", choices=("token", "sequence"),
                   help="RAG-Token or RAG-Sequence (default: from settings)")
    p.add_argument("--decoding", choices=("thorough", "fast"),
                   help="RAG-Sequence decoding (default: from settings)")
    p.add_argument("--docs", type=int, metavar="K",
                   help="passages per answer (default: from settings)")
    p.add_argument("--retriever", choices=RETRIEVERS,
                   help="dense, sparse (BM25) or hybrid (default: from settings)")
    add_answer_options(p)
    p.add_argument("--max-new-tokens", type=int, metavar="N",
                   help="longest answer in tokens (default: from settings, else 32)")
    p.add_argument("--limit", type=int, metavar="N", help="only the first N questions")
    p.add_argument("--skip", type=int, default=0, metavar="N",
                   help="skip the first N questions of the file (before --limit)")
    p.add_argument("--answerable-only", action="store_true",
                   help="generate answers only for the questions the snapshot can answer")
    p.add_argument("--retrieval-only", action="store_true",
                   help="measure retrieval only (no generator is loaded; EM/F1 are null)")
    p.add_argument("--batch-size", type=int, default=64, metavar="B",
                   help="questions encoded and searched together (default: 64)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--out", metavar="FILE",
                   help="write one JSON line per question: prediction, scores and cited passages")
    p.set_defaults(func=cmd_eval)


def _setting(args_value: Any, ctx: AppContext, key: str) -> Any:
    return args_value if args_value is not None else ctx.settings.get(key)


def cmd_eval(args: argparse.Namespace, ctx: AppContext) -> int:
    passive_openmp_waits()
    from ragdesk.core.evaluation.questions import read_questions
    from ragdesk.core.evaluation.runner import evaluate
    from ragdesk.core.progress import terminal_printer
    from ragdesk.core.sparse.hybrid import retrieve_batch
    from ragdesk.core.sparse.store import ensure_sparse

    retriever = str(_setting(args.retriever, ctx, "retriever") or "dense")
    mode = str(_setting(args.mode, ctx, "mode") or "token")
    decoding = str(_setting(args.decoding, ctx, "decoding") or "fast")
    n_docs = int(_setting(args.docs, ctx, "n_docs") or 5)
    style = str(_setting(args.style, ctx, "style") or DEFAULT_STYLE)
    grounded = grounded_setting(args.grounded, ctx)
    max_new = int(_setting(args.max_new_tokens, ctx, "max_new_tokens") or 32)
    if max_new < 1:
        raise BadInputError(f"--max-new-tokens must be at least 1, not {max_new}.")
    from ragdesk.core.engine.causal_decoder import check_precision, default_precision

    precision = str(_setting(args.precision, ctx, PRECISION_KEY) or default_precision())
    if args.skip < 0:
        raise BadInputError(f"--skip must be 0 or more, not {args.skip}.")
    if retriever not in RETRIEVERS:
        raise BadInputError(f"Unknown retriever {retriever!r} in the settings.",
                            hint="Use --retriever dense, sparse or hybrid.")
    if n_docs < 1:
        raise BadInputError(f"--docs must be at least 1, not {n_docs}.")
    check_precision(precision)
    if args.batch_size < 1:
        raise BadInputError(f"--batch-size must be at least 1, not {args.batch_size}.")
    out_path = Path(args.out) if args.out else None
    if out_path is not None and not out_path.parent.exists():
        raise BadInputError(f"The folder of --out {out_path} does not exist.")

    from_stdin = args.questions == "-"
    questions = read_questions("<stdin>" if from_stdin else args.questions,
                               stream=sys.stdin.buffer if from_stdin else None)[args.skip:]
    if args.limit is not None:
        if args.limit < 1:
            raise BadInputError(f"--limit must be at least 1, not {args.limit}.")
        questions = questions[:args.limit]
    progress = terminal_printer()
    snapshot, pack_name, pack, encoder = snapshot_pack_encoder(ctx, args.snapshot, args.pack)
    if retriever != "dense":
        ensure_sparse(snapshot, progress=progress)

    answer = None
    engine: Any = None
    generator: Any = None
    if not args.retrieval_only:
        from ragdesk.core.engine import Engine
        from ragdesk.core.models import load_generator

        generator = load_generator(pack.generator, precision=precision)
        engine = Engine(encoder, generator)

        def answer(question: str) -> Any:
            return engine.answer(question, mode=mode, decoding=decoding, n_docs=n_docs,
                                 retriever=retriever, snapshot=snapshot, style=style,
                                 grounded=grounded, temperature=args.temperature,
                                 max_new_tokens=max_new)

    config = {"questions": str(args.questions), "snapshot": snapshot.name,
              "passages": int(snapshot.size), "pack": pack_name, "retriever": retriever,
              "retrieval_only": bool(args.retrieval_only), "n_docs": n_docs,
              "mode": None if args.retrieval_only else mode,
              "decoding": None if args.retrieval_only or mode != "sequence" else decoding,
              "style": None if args.retrieval_only else style,
              "max_new_tokens": None if args.retrieval_only else max_new,
              "grounded": None if engine is None else resolve_grounded(
                  grounded, engine.generator.kind),
              "precision": (None if args.retrieval_only
                            else getattr(generator, "precision", "float32")),
              "temperature": (args.temperature if args.temperature is not None
                              else snapshot.temperature),
              "skip": args.skip, "answerable_only": bool(args.answerable_only)}
    report = evaluate(
        questions, encoder=encoder,
        retrieve_batch=lambda qs, vecs, k: retrieve_batch(snapshot, qs, vecs, k, retriever),
        passages=snapshot, answer=answer, cite=n_docs, batch_size=args.batch_size,
        config=config, progress=progress, ks=sorted(set(DEFAULT_KS) | {n_docs}),
        answerable_only=bool(args.answerable_only))
    summary = report.to_json()
    if out_path is not None:
        with open(out_path, "w", encoding="utf-8") as fh:
            for r in report.results:
                fh.write(json.dumps(r.to_json(), ensure_ascii=False) + "\n")
    if args.json:
        print_json(summary)
    else:
        _print_summary(summary)
        if out_path is not None:
            print(f"\nPer-question results: {out_path}")
    return 0


def _fmt(v: float | None, pct: bool = True) -> str:
    if v is None:
        return "-"
    return f"{100 * v:.1f}" if pct else f"{v:.3f}"


def _print_summary(s: dict[str, Any]) -> None:
    c = s["config"]
    ans = s.get("answerable")
    what = "retrieval only" if c["retrieval_only"] else (
        f"RAG-{c['mode'].title()}" + (f", {c['decoding']} decoding" if c["decoding"] else ""))
    if not c["retrieval_only"]:
        what += f"; {c['style']} answers" + ("; grounded" if c["grounded"] else "")
        if c.get("precision"):
            what += f"; generator in {c['precision']}"
    print(f"{s['n']:,} questions; snapshot {c['snapshot']!r} ({c['passages']:,} passages); "
          f"pack {c['pack']}; {c['retriever']} retriever; {what}; {c['n_docs']} passages per "
          f"answer; retrieval temperature {c['temperature']:.4g}")
    headers = ["", "all"] + ([f"answerable ({ans['n']:,})"] if ans else [])
    rows = []
    for key, label in (("em", "exact match %"), ("f1", "F1 %")):
        rows.append([label, _fmt(s[key])] + ([_fmt(ans[key])] if ans else []))
    for k, v in s["top_k_accuracy"].items():
        rows.append([f"top-{k} accuracy %", _fmt(v)] +
                    ([_fmt(ans["top_k_accuracy"][k])] if ans else []))
    for key, label in (("mean_top1_prob", "mean top-1 p(z|x)"),
                       ("mean_token_entropy", "mean source entropy (nats)")):
        if s.get(key) is not None or (ans and ans.get(key) is not None):
            rows.append([label, _fmt(s.get(key), pct=False)] +
                        ([_fmt(ans.get(key), pct=False)] if ans else []))
    print()
    print_table(headers, rows)
    k = str(c["n_docs"])
    ceiling = (ans or s)["top_k_accuracy"].get(k)
    if ceiling is not None and not c["retrieval_only"]:
        print(f"\nThe generator reads the top {k} passages: an answer is among them for "
              f"{_fmt(ceiling)} % of the {'answerable ' if ans else ''}questions "
              "(the ceiling for exact match).")
    t = s["timings"]
    print()
    line = (f"retrieval {t['retrieval_per_question_ms']:.1f} ms/question "
            f"(batched encoding {t['question_encoding_s']:.1f} s, search {t['search_s']:.1f} s)")
    if "answer_per_question_ms" in t:
        line += f"; answering {t['answer_per_question_ms'] / 1000:.2f} s/question"
    print(line + f"; total {t['total_s']:.1f} s", file=sys.stdout)
