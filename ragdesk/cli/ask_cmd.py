"""`ragdesk ask "QUESTION"`: answer one question with numbered citations and per-token
sources."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from ragdesk.cli.common import (
    add_answer_options,
    add_decoding_options,
    answer_options,
    pack_answer_options,
    print_json,
)
from ragdesk.core.cpu import prepare_for_models
from ragdesk.core.errors import BadInputError
from ragdesk.core.retriever_names import retriever_in_sentence
from ragdesk.core.terminal_text import terminal_safe
from ragdesk.core.units import logprob_text, prior_text

if TYPE_CHECKING:
    from ragdesk.core.app import AppContext
    from ragdesk.core.engine.generators import Generator
    from ragdesk.core.options import AnswerOptions
    from ragdesk.core.snapshots import SnapshotIndex
    from ragdesk.core.snapshots.staged import StagedSnapshot
    from ragdesk.core.types import Answer, AnswerToken


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "ask", help="answer a question from the active snapshot",
        description="Retrieves K passages for the question and generates an answer that "
                    "marginalizes over them (RAG-Token or RAG-Sequence). Prints the answer, "
                    "the passages as numbered citations and, for every answer token, the "
                    "passage it mostly came from. Defaults come from the settings. When "
                    "`ragdesk serve` runs on the same data directory with its own default "
                    "models, the question goes to it and no model loads here.")
    p.add_argument("question", metavar="QUESTION")
    p.add_argument("--snapshot", metavar="NAME", help="snapshot to use (default: the active one)")
    p.add_argument("--pack", metavar="P",
                   help="model pack (default: the chosen one, else the snapshot's own)")
    p.add_argument("--question-encoder", metavar="M",
                   help="question encoder: hub id, folder or RAG checkpoint (overrides the pack)")
    p.add_argument("--generator", metavar="M",
                   help="generator: hub id, folder, RAG checkpoint or .gguf (overrides the pack)")
    add_decoding_options(p)
    p.add_argument("--beams", type=int, metavar="N", help="beam size (1: greedy)")
    add_answer_options(p)
    p.add_argument("--json", action="store_true",
                   help="print the answer, its tokens with sources, and the passages as JSON")
    p.set_defaults(func=cmd_ask)


def cmd_ask(args: argparse.Namespace, ctx: AppContext) -> int:
    t_start = time.perf_counter()
    prepare_for_models()
    if not args.question.strip():
        raise BadInputError("The question is empty.", hint='Run ragdesk ask "your question".')
    from ragdesk.core.options import check_question

    # Bytes that are not UTF-8 (ragdesk ask $'\xff') arrive as lone surrogates: a clear
    # refusal (exit 2) now instead of a tokenizer TypeError after the models have loaded.
    check_question(args.question)
    # Everything that can be checked without a model is checked before one loads (loading the
    # starter pack takes seconds; a typo should not).
    opts = answer_options(args, ctx)
    if _models_of_the_pack(args):
        # before the catalog and the snapshot's index are opened here: the server has them
        answered = _ask_running_server(args, ctx, opts, args.snapshot, t_start)
        if answered is not None:
            return answered
    from ragdesk.core.progress import after_delay, terminal_printer
    from ragdesk.core.session import open_answerable

    # none active, damaged; a first open hashes the files (minutes for a large snapshot); a
    # snapshot whose staged import has its BM25 stage answers with that meanwhile
    snapshot = open_answerable(ctx.data, ctx.catalog, args.snapshot,
                               progress=after_delay(terminal_printer(sys.stderr), 1.0))
    try:
        return _answer_here(args, ctx, opts, snapshot, t_start)
    finally:
        snapshot.close()


def _answer_here(args: argparse.Namespace, ctx: AppContext, opts: AnswerOptions,
                 snapshot: SnapshotIndex | StagedSnapshot, t_start: float) -> int:
    """Load the models in this process and answer."""
    from ragdesk.core.engine import Engine
    from ragdesk.core.engine.causal_decoder import default_precision
    from ragdesk.core.models.loading import load_generator, load_question_encoder
    from ragdesk.core.session import answer_from_ready, ready_plan
    from ragdesk.core.snapshots import SnapshotLibrary

    qenc_ref, gen_ref, pack_name = _model_refs(args, ctx, snapshot)
    if pack_name is not None:
        from ragdesk.core.models.packs import get_pack

        opts = pack_answer_options(opts, get_pack(ctx.catalog, pack_name, ctx.data), args,
                                   ctx)
    for what in ready_plan(snapshot, opts.retriever, opts.n_docs).notes():
        print(f"ragdesk: {what}", file=sys.stderr)
    marks = {"checked": time.perf_counter()}
    encoder = load_question_encoder(qenc_ref, answering=True)
    snapshot.check_query_encoder(encoder.info)
    marks["encoder"] = time.perf_counter()
    gen = load_generator(gen_ref, precision=opts.precision or default_precision(),
                         answering=True)
    marks["loaded"] = time.perf_counter()
    engine = Engine(encoder, gen, library=SnapshotLibrary(ctx.data, ctx.catalog),
                    snapshot=snapshot.name, owns_library=True)
    streamed: list[str] = []
    _stream_to_stdout = _StdoutStream()

    def on_token(tok: AnswerToken) -> None:
        marks.setdefault("first", time.perf_counter())
        if not args.json and _stream_to_stdout.live:
            streamed.append(tok.text)
            _stream_to_stdout(tok)

    try:
        marks["ask"] = time.perf_counter()
        ans = answer_from_ready(engine, args.question, opts, snapshot=snapshot,
                                on_token=on_token)
        marks["done"] = time.perf_counter()
    finally:
        engine.close()
    if streamed:
        print(flush=True)  # end the streamed line before the timings go to stderr
    if args.verbose:
        _print_timings(ans, gen, marks, t_start)
    # what loading cost, apart from the answer's own timings (a script can tell the two)
    loading = {"question_encoder_s": marks["encoder"] - marks["checked"],
               "generator_s": marks["loaded"] - marks["encoder"]}
    return _print_answer(args, ans, bool(streamed), {
        "pack": pack_name, "precision": _precision_of(gen), "load_s": loading})


def _print_timings(ans: Answer, gen: Generator, marks: dict[str, float], t_start: float) -> None:
    t, m = ans.timings, marks
    ttft = f"; first token after {m['first'] - m['ask']:.2f} s" if "first" in m else ""
    print(f"ragdesk: checks {m['checked'] - t_start:.2f} s; loaded the question encoder in "
          f"{m['encoder'] - m['checked']:.2f} s and the generator ({gen.kind}, "
          f"{_precision_of(gen)}) in {m['loaded'] - m['encoder']:.2f} s; answered in "
          f"{m['done'] - m['ask']:.2f} s (retrieval {t.get('retrieve_s', 0):.2f} s, prompts "
          f"{t.get('encode_s', 0):.2f} s, decoding {t.get('decode_s', 0):.2f} s{ttft}); total "
          f"{time.perf_counter() - t_start:.2f} s", file=sys.stderr)


def _model_refs(args: argparse.Namespace, ctx: AppContext,
                snapshot: SnapshotIndex | StagedSnapshot
                ) -> tuple[str, str, str | None]:
    """(question encoder, generator, pack name or None when both models were given), the
    pack checked to fit the snapshot; says on stderr what answers."""
    from ragdesk.core.models.packs import check_pack_matches_snapshot, get_pack
    from ragdesk.core.session import resolve_pack_name

    pack_name = resolve_pack_name(ctx, args.pack, snapshot.name)
    pack = None
    if args.pack or args.question_encoder is None or args.generator is None:
        pack = get_pack(ctx.catalog, pack_name, ctx.data)  # a named pack must exist
        if args.question_encoder is None:
            check_pack_matches_snapshot(pack, snapshot.encoder, snapshot.name)
    qenc_ref = str(args.question_encoder or pack.question_encoder)  # type: ignore[union-attr]
    gen_ref = str(args.generator or pack.generator)  # type: ignore[union-attr]
    if not (args.question_encoder or args.generator):
        used = f"pack {pack_name!r}"
    else:
        used = ", ".join(
            f"{role} {ref if given else f'of pack {pack_name!r}'}"
            for role, ref, given in (("question encoder", qenc_ref, args.question_encoder),
                                     ("generator", gen_ref, args.generator)))
    print(f"ragdesk: snapshot {snapshot.name!r} ({snapshot.size:,} passages), {used}",
          file=sys.stderr)
    return qenc_ref, gen_ref, (pack_name if pack is not None else None)


def _print_answer(args: argparse.Namespace, ans: Answer, streamed: bool,
                  json_extra: dict[str, object]) -> int:
    from ragdesk.core.confidence import after_streamed, confidence_label, origin_note, shown_text

    if args.json:
        print_json({**ans.to_json(), "message": shown_text(ans), **json_extra})
        return 0
    if ans.abstained or (ans.from_memory and streamed):
        # streamed: the guess, or the passages' answer, is on screen already; the verdict
        # follows it (not streamed: the same lines are the whole answer)
        print(("\n" if streamed else "")
              + "\n".join(terminal_safe(line, newlines=True) for line in after_streamed(ans)))
    elif not streamed:
        print(terminal_safe(ans.text, newlines=True) or "(empty answer)")
    if not ans.cancelled:
        print(("" if ans.abstained or not streamed or ans.from_memory else "\n")
              + confidence_label(ans.confidence, ans.abstained))
        note = origin_note(ans)
        if note:
            print(note)
    _print_sources(ans)
    return 0


def _models_of_the_pack(args: argparse.Namespace) -> bool:
    """Whether the models come from a pack, named or chosen (a running server may have that
    one loaded; models named one by one or a reduced precision are this command's own
    business)."""
    return not (args.question_encoder or args.generator or args.precision)


def _ask_running_server(args: argparse.Namespace, ctx: AppContext, opts: AnswerOptions,
                        snapshot: str | None, t_start: float) -> int | None:
    """Answer through `ragdesk serve` on this data directory when one is ready; None: there
    is none (or it refused before answering), load the models here."""
    from ragdesk.cli.ask_remote import ask_remote, find_server, note
    from ragdesk.core.pack_choice import chosen_pack

    found = find_server(ctx.data.root, args.pack or chosen_pack(ctx.settings))
    if found is None:
        return None
    url, headers = found
    streamed: list[str] = []
    _stream_to_stdout = _StdoutStream()

    def on_token(tok: AnswerToken) -> None:
        if not args.json and _stream_to_stdout.live:
            streamed.append(tok.text)
            _stream_to_stdout(tok)

    t_ask = time.perf_counter()
    # Without --mode the server reads in the mode chosen for its pack, else in its own.
    ans = ask_remote(url, headers, args.question, snapshot, opts, on_token,
                     send_mode=args.mode is not None)
    if ans is None:
        return None
    if streamed:
        print(flush=True)
    note(url)
    if args.verbose:
        t = ans.timings
        print(f"ragdesk: answered in {time.perf_counter() - t_ask:.2f} s by the server "
              f"(prompts {t.get('encode_s', 0):.2f} s, decoding {t.get('decode_s', 0):.2f} s); "
              f"total {time.perf_counter() - t_start:.2f} s", file=sys.stderr)
    return _print_answer(args, ans, bool(streamed), {"server": url})


def _precision_of(gen: object) -> str:
    return str(getattr(gen, "precision", "float32"))


def _stdout_is_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced or closed stdout
        return False


class _StdoutStream:
    """Tokens printed as they come, in the pieces the finished answer is made of (no
    tokenizer's leading space before the first word). Only to a terminal (``live``): words
    that turn out to be a guess the answer does not give cannot be taken back, and a reader
    of a pipe or a file gets the answer as it is finally stated, its first line included."""

    def __init__(self) -> None:
        from ragdesk.core.streamed_text import StreamedText

        self.text = StreamedText()
        self.live = _stdout_is_terminal()

    def __call__(self, tok: AnswerToken) -> None:
        piece = self.text.piece(tok.text)
        if piece:
            sys.stdout.write(terminal_safe(piece, newlines=True))
            sys.stdout.flush()


def _print_sources(ans: Answer) -> None:
    what = {"token": "RAG-Token", "together": "passages read together"}.get(
        ans.mode, f"RAG-Sequence ({ans.decoding})")
    if ans.retriever:
        what += f", {retriever_in_sentence(ans.retriever)} retrieval"
    print(f"\n{what}, {logprob_text(ans.logprob)}, snapshot {terminal_safe(ans.snapshot)}, "
          f"p(z|x) temperature {ans.temperature:.4g}")
    if ans.tokens:
        marked = " ".join(f"{terminal_safe(t.text.strip()) or repr(t.text)}[{t.source + 1}]"
                          for t in ans.tokens)
        print(f"\nTokens [main source]: {marked}")
    print("\nClosest passages (none seems to hold the answer):" if ans.abstained
          else "\nSources:")
    for i, d in enumerate(ans.docs, 1):
        text = terminal_safe(" ".join(d.text.split()))
        short = text if len(text) <= 160 else text[:157] + "..."
        print(f"  [{i}] {terminal_safe(d.title)}  ({prior_text(d.prob)}, score {d.score:.2f})")
        print(f"      {short}")
