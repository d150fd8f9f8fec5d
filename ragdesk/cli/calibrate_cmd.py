"""`ragdesk index calibrate NAME QUESTIONS.jsonl`: fit the snapshot's retrieval temperature."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ragdesk.cli.common import print_json, snapshot_pack_encoder
from ragdesk.core.errors import BadInputError
from ragdesk.core.units import share_or_dash

if TYPE_CHECKING:
    from ragdesk.core.app import AppContext
    from ragdesk.core.confidence import ConfidenceModel
    from ragdesk.core.encoders import TextEncoder
    from ragdesk.core.evaluation.questions import Question
    from ragdesk.core.models import PackSpec
    from ragdesk.core.snapshots import SnapshotIndex


def register(isub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    c = isub.add_parser(
        "calibrate", help="fit the retrieval temperature of p(z|x) on questions with answers",
        description="Retrieves the top K passages for each question (NQ-open style JSONL) and "
                    "fits the temperature τ of p(z|x) = softmax(score / τ) that puts the most "
                    "probability on the passages holding a gold answer; stores it with the "
                    "snapshot, where the engine, training and the explore views use it. Use "
                    "questions you will not evaluate on.")
    c.add_argument("name", metavar="NAME")
    c.add_argument("questions", metavar="QUESTIONS.jsonl")
    c.add_argument("--docs", type=int, default=20, metavar="K",
                   help="passages per question in the fit (default: 20)")
    c.add_argument("--skip", type=int, default=0, metavar="N",
                   help="skip the first N questions of the file")
    c.add_argument("--limit", type=int, metavar="N", help="use at most N questions")
    c.add_argument("--pack", metavar="P", help="model pack whose question encoder to use")
    c.add_argument("--confidence", action="store_true",
                   help="also answer every question with the pack's generator and fit the "
                        "confidence model that decides when an answer says \"not found in this "
                        "snapshot\" (about a second per question with the starter pack)")
    c.add_argument("--dry-run", action="store_true", help="report the fit without storing it")
    c.add_argument("--json", action="store_true", help="print the report as JSON")
    c.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.core.evaluation.calibrate import calibrate_temperature
    from ragdesk.core.evaluation.questions import read_questions
    from ragdesk.core.progress import terminal_printer
    from ragdesk.core.snapshots.calibration import Calibration, write_calibration

    if args.docs < 2:
        raise BadInputError(f"--docs must be at least 2, not {args.docs}.")
    if args.skip < 0 or (args.limit is not None and args.limit < 1):
        raise BadInputError("--skip must be 0 or more and --limit at least 1.")
    questions = read_questions(args.questions)[args.skip:]
    if args.limit is not None:
        questions = questions[:args.limit]
    if not questions:
        raise BadInputError("No questions left to calibrate on.",
                            hint="Check the file, --skip and --limit.")
    snapshot, _, pack, encoder = snapshot_pack_encoder(ctx, args.name, args.pack)
    try:
        report = calibrate_temperature(snapshot, encoder, questions, docs=args.docs,
                                       progress=terminal_printer(sys.stderr))
    except ValueError as exc:
        raise BadInputError(str(exc), hint="Use more questions, or a larger --docs.") from exc
    fit = report.fit
    if not args.dry_run:
        lines = f"{args.skip + 1}-{args.skip + len(questions)}"
        source = f"{args.questions} lines {lines}, K={args.docs}"
        write_calibration(snapshot.folder, Calibration(
            temperature=fit.temperature, questions=fit.questions, source=source,
            log_likelihood=fit.log_likelihood, log_likelihood_at_1=fit.log_likelihood_at_1))
    confidence = (_fit_confidence(args, ctx, snapshot, pack, encoder, questions,
                                  fit.temperature) if args.confidence else None)
    if args.json:
        print_json({**report.to_json(), "stored": not args.dry_run,
                    "confidence": confidence.to_json() if confidence is not None else None})
        return 0
    print(f"{args.name}: temperature {fit.temperature:.4g} fitted on {fit.questions:,} of "
          f"{report.questions:,} questions (top {args.docs}); mean log-likelihood of the "
          f"answer passages {fit.log_likelihood:.3f} (τ = 1: {fit.log_likelihood_at_1:.3f}); "
          f"mean top-1 p(z|x) of 5 passages {report.mean_top1_after:.3f} "
          f"(τ = 1: {report.mean_top1_before:.3f}).")
    if confidence is not None:
        memory = confidence.fitted_on.get("with_memory")
        cv = confidence.measured()["cross_validated"]
        print(f"confidence: threshold {confidence.threshold:.3f}; cross-validated AUROC "
              f"{cv['auroc']:.3f}, calibration error {cv['ece']:.3f}; at the threshold "
              f"{cv['given']:,} of {confidence.fitted_on['questions']:,} answers given, "
              f"{share_or_dash(cv['given_right_share'])} of them right.")
        if memory is not None:
            print(f"answers from the reader's memory: kept for {memory['from_memory']:,} "
                  f"questions; {memory['right']:,} answers right against "
                  f"{memory['right_from_passages_alone']:,} from the passages alone "
                  "(cross-validated).")
    print("Stored with the snapshot." if not args.dry_run else "Not stored (--dry-run).")
    return 0


def _fit_confidence(args: argparse.Namespace, ctx: AppContext, snapshot: SnapshotIndex,
                    pack: PackSpec, encoder: TextEncoder, questions: list[Question],
                    temperature: float) -> ConfidenceModel:
    """Answer ``questions`` as `ask` would (with the τ just fitted) and fit the model on
    the answers; stored with the snapshot for the pack's generator unless --dry-run."""
    from ragdesk.cli.common import answer_options, pack_answer_options
    from ragdesk.cli.eval_cmd import make_answerer
    from ragdesk.core.confidence import write_snapshot_model
    from ragdesk.core.evaluation.confidence_fit import fit_on_results
    from ragdesk.core.evaluation.runner import evaluate
    from ragdesk.core.progress import terminal_printer
    from ragdesk.core.retrieval import retrieve_batch

    # Answered as `ask` answers (the settings, the pack's own reading mode), not with the
    # τ fit's --docs: the model is for the answers it will judge.
    asked = argparse.Namespace()
    opts = pack_answer_options(answer_options(asked, ctx), pack, asked, ctx).replace(
        temperature=temperature)
    engine, answer = make_answerer(opts, pack, encoder, snapshot)
    report = evaluate(
        questions, encoder=encoder, answer=answer, cite=opts.n_docs,
        retrieve_batch=lambda qs, vecs, k: retrieve_batch(snapshot, qs, vecs, k, opts.retriever),
        progress=terminal_printer(sys.stderr))
    lines = f"{args.skip + 1}-{args.skip + len(questions)}"
    try:
        model = fit_on_results([r.to_json() for r in report.results],
                               source=f"{args.questions} lines {lines}, K={opts.n_docs}",
                               modes=(opts.mode,))
    except ValueError as exc:
        raise BadInputError(f"The confidence model cannot be fitted: {exc}.",
                            hint="Use more questions (a few hundred), with known answers.") \
            from exc
    if not args.dry_run:
        write_snapshot_model(snapshot.folder, engine.generator.name, model)
    return model
