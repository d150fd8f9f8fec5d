"""`ragdesk eval QUESTIONS.jsonl ...`: exact match, F1 and retrieval accuracy on NQ-open style
questions."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragdesk.cli.common import (
    add_answer_options,
    add_decoding_options,
    answer_options,
    pack_answer_options,
    print_json,
    print_table,
    snapshot_pack_encoder,
)
from ragdesk.core.atomic import write_bytes_atomic
from ragdesk.core.cpu import prepare_for_models
from ragdesk.core.errors import BadInputError
from ragdesk.core.evaluation.metrics import DEFAULT_KS
from ragdesk.core.evaluation.questions import Question, read_questions
from ragdesk.core.options import AnswerOptions, resolve_grounded
from ragdesk.core.units import share_or_dash

if TYPE_CHECKING:
    from ragdesk.core.app import AppContext
    from ragdesk.core.encoders import TextEncoder
    from ragdesk.core.engine import Engine
    from ragdesk.core.evaluation.runner import QuestionResult
    from ragdesk.core.models import PackSpec
    from ragdesk.core.snapshots import SnapshotIndex
    from ragdesk.core.types import Answer


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
    add_decoding_options(p)
    add_answer_options(p)
    p.add_argument("--limit", type=int, metavar="N", help="only the first N questions")
    p.add_argument("--skip", type=int, default=0, metavar="N",
                   help="skip the first N questions of the file (before --limit)")
    p.add_argument("--answerable-only", action="store_true",
                   help="generate answers only for the questions the snapshot can answer")
    p.add_argument("--retrieval-only", action="store_true",
                   help="measure retrieval only (no generator is loaded; EM/F1 are null)")
    p.add_argument("--only-model-features", action="store_true",
                   help="compute only the confidence features the snapshot's model reads "
                        "(skips the closed-book pass, a second reading of each answer, where "
                        "it reads none); the --out rows then cannot fit a model that reads "
                        "them")
    p.add_argument("--batch-size", type=int, default=64, metavar="B",
                   help="questions encoded and searched together (default: 64)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--out", metavar="FILE",
                   help="write one JSON line per question: prediction, scores and cited passages")
    p.set_defaults(func=cmd_eval)


def _check_args(args: argparse.Namespace) -> Path | None:
    """Refuse bad numbers and paths before anything loads; the --out path."""
    if args.skip < 0:
        raise BadInputError(f"--skip must be 0 or more, not {args.skip}.")
    if args.batch_size < 1:
        raise BadInputError(f"--batch-size must be at least 1, not {args.batch_size}.")
    if args.limit is not None and args.limit < 1:
        raise BadInputError(f"--limit must be at least 1, not {args.limit}.")
    out_path = Path(args.out) if args.out else None
    if out_path is not None and not out_path.parent.exists():
        raise BadInputError(f"The folder of --out {out_path} does not exist.")
    return out_path


def _questions(args: argparse.Namespace) -> list[Question]:
    from_stdin = args.questions == "-"
    questions = read_questions("<stdin>" if from_stdin else args.questions,
                               stream=sys.stdin.buffer if from_stdin else None)[args.skip:]
    return questions if args.limit is None else questions[:args.limit]


def make_answerer(opts: AnswerOptions, pack: PackSpec, encoder: TextEncoder,
                  snapshot: SnapshotIndex, every_feature: bool = True,
                  ) -> tuple[Engine, Callable[[str], Answer]]:
    from ragdesk.core.confidence.store import reads_memory
    from ragdesk.core.engine import Engine
    from ragdesk.core.models import load_generator

    generator = load_generator(pack.generator, precision=opts.precision, answering=True)
    # every feature by default: eval's rows are what confidence models are fitted on; a
    # reader that answers from memory has both candidates in each row, whichever model the
    # snapshot has (one fitted without a memory part would otherwise never get one)
    engine = Engine(encoder, generator, every_feature=every_feature,
                    read_memory=reads_memory(generator.name))

    def answer(question: str) -> Answer:
        return engine.ask(question, opts, snapshot=snapshot)

    return engine, answer


def _config(args: argparse.Namespace, opts: AnswerOptions, snapshot: SnapshotIndex,
            pack_name: str, engine: Engine | None) -> dict[str, object]:
    answering = engine is not None
    return {"questions": str(args.questions), "snapshot": snapshot.name,
            "passages": int(snapshot.size), "pack": pack_name, "retriever": opts.retriever,
            "retrieval_only": bool(args.retrieval_only), "n_docs": opts.n_docs,
            "mode": opts.mode if answering else None,
            "decoding": opts.decoding if answering and opts.mode == "sequence" else None,
            "style": opts.style if answering else None,
            "max_new_tokens": opts.max_new_tokens if answering else None,
            "grounded": (resolve_grounded(opts.grounded, engine.generator.kind)
                         if engine is not None else None),
            "precision": (str(getattr(engine.generator, "precision", "float32"))
                          if engine is not None else None),
            "temperature": (opts.temperature if opts.temperature is not None
                            else snapshot.temperature),
            "skip": args.skip, "answerable_only": bool(args.answerable_only),
            "abstain": opts.abstain if answering else None}


def cmd_eval(args: argparse.Namespace, ctx: AppContext) -> int:
    prepare_for_models()
    from ragdesk.core.evaluation.runner import evaluate
    from ragdesk.core.progress import terminal_printer
    from ragdesk.core.retrieval import retrieve_batch
    from ragdesk.core.sparse import ensure_sparse

    opts = answer_options(args, ctx)
    out_path = _check_args(args)
    questions = _questions(args)
    progress = terminal_printer()
    snapshot, pack_name, pack, encoder = snapshot_pack_encoder(ctx, args.snapshot, args.pack)
    opts = pack_answer_options(opts, pack, args, ctx)
    if opts.retriever != "dense":
        ensure_sparse(snapshot, progress=progress)
    engine, answer = (None, None) if args.retrieval_only else make_answerer(
        opts, pack, encoder, snapshot, every_feature=not args.only_model_features)
    partial = _PartialOut(out_path)
    try:
        report = evaluate(
            questions, encoder=encoder,
            retrieve_batch=lambda qs, vecs, k: retrieve_batch(snapshot, qs, vecs, k,
                                                              opts.retriever),
            passages=snapshot, answer=answer, cite=opts.n_docs, batch_size=args.batch_size,
            config=_config(args, opts, snapshot, pack_name, engine), progress=progress,
            ks=sorted(set(DEFAULT_KS) | {opts.n_docs}),
            answerable_only=bool(args.answerable_only), abstain=opts.abstain,
            on_answered=partial.write)
    finally:
        partial.close()
    summary = report.to_json()
    if out_path is not None:
        write_bytes_atomic(out_path, "".join(
            json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in report.results
        ).encode("utf-8"))
        partial.remove()
    if args.json:
        print_json(summary)
    else:
        _print_summary(summary)
        if out_path is not None:
            print(f"\nPer-question results: {out_path}")
    return 0


def _print_confidence(conf: dict[str, Any] | None, on_answerable: dict[str, Any] | None) -> None:
    if not conf:
        return
    auroc = (on_answerable or {}).get("auroc") or conf.get("auroc_answerable")
    print(f"\nconfidence: AUROC {_fmt(conf['auroc'], pct=False)} (answerable questions: "
          f"{_fmt(auroc, pct=False)}); expected calibration error {_fmt(conf['ece'], pct=False)}")
    g = conf.get("at_threshold")
    if g:
        print(f"answers given {g['given']:,} of {conf['n']:,}, right "
              f"{share_or_dash(g['given_right_share'])}; right answers kept "
              f"{share_or_dash(g['right_kept_share'])}; questions the snapshot cannot answer "
              f"that said \"not found\" {share_or_dash(g['unanswerable_abstain_share'])}")


class _PartialOut:
    """``FILE.partial`` beside ``--out``: each answered question's line as soon as it is
    answered, so an evaluation of hours that is stopped or crashes keeps what it did; the
    complete file replaces it at the end."""

    def __init__(self, out_path: Path | None) -> None:
        self.path = out_path.with_name(out_path.name + ".partial") if out_path else None
        self._fh = open(self.path, "w", encoding="utf-8") if self.path else None  # noqa: SIM115

    def write(self, result: QuestionResult) -> None:
        if self._fh is not None:
            self._fh.write(json.dumps(result.to_json(), ensure_ascii=False) + "\n")
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def remove(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)


def _fmt(v: float | None, pct: bool = True) -> str:
    if v is None:
        return "-"
    return f"{100 * v:.1f}" if pct else f"{v:.3f}"


def _print_summary(s: dict[str, Any]) -> None:
    from ragdesk.core.export import MODE_NAMES
    from ragdesk.core.retriever_names import retriever_in_sentence

    c = s["config"]
    ans = s.get("answerable")
    what = "retrieval only" if c["retrieval_only"] else (
        MODE_NAMES.get(c["mode"], c["mode"])
        + (f", {c['decoding']} decoding" if c["decoding"] else ""))
    if not c["retrieval_only"]:
        what += f"; {c['style']} answers" + ("; grounded" if c["grounded"] else "")
        if c.get("precision"):
            what += f"; generator in {c['precision']}"
    retriever = retriever_in_sentence(c["retriever"])
    print(f"{s['n']:,} questions; snapshot {c['snapshot']!r} ({c['passages']:,} passages); "
          f"pack {c['pack']}; {retriever} retriever; {what}; {c['n_docs']} passages per "
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
    _print_confidence(s.get("confidence"), (ans or {}).get("confidence"))
    k = str(c["n_docs"])
    ceiling = (ans or s)["top_k_accuracy"].get(k)
    if ceiling is not None and not c["retrieval_only"]:
        memory = int(str(s.get("from_memory") or 0))
        print(f"\nThe generator reads the top {k} passages: an answer is among them for "
              f"{share_or_dash(ceiling)} of the {'answerable ' if ans else ''}questions "
              + ("(the ceiling for exact match)." if not memory else
                 f"(the ceiling for answers read from them); {memory:,} of the {s['n']:,} "
                 "answers came from the reader's memory instead."))
    t = s["timings"]
    print()
    line = (f"retrieval {t['retrieval_per_question_ms']:.1f} ms/question "
            f"(batched encoding {t['question_encoding_s']:.1f} s, search {t['search_s']:.1f} s)")
    if "answer_per_question_ms" in t:
        line += f"; answering {t['answer_per_question_ms'] / 1000:.2f} s/question"
    print(line + f"; total {t['total_s']:.1f} s", file=sys.stdout)
