"""`ragdesk ask "QUESTION"`: answer one question with numbered citations and per-token
sources."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ragdesk.cli.common import (
    add_answer_options,
    grounded_setting,
    print_json,
    terminal_safe,
)
from ragdesk.core.cpu import passive_openmp_waits
from ragdesk.core.errors import BadInputError
from ragdesk.core.options import DEFAULT_STYLE, PRECISION_KEY

if TYPE_CHECKING:
    from ragdesk.core.app import AppContext

RETRIEVERS = ("dense", "sparse", "hybrid")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "ask", help="answer a question from the active snapshot",
        description="Retrieves K passages for the question and generates an answer that "
                    "marginalizes over them (RAG-Token or RAG-Sequence). Prints the answer, "
                    "the passages as numbered citations and, for every answer token, the "
                    "passage it mostly came from. Defaults come from the settings.")
    p.add_argument("question", metavar="QUESTION")
    p.add_argument("--snapshot", metavar="NAME", help="snapshot to use (default: the active one)")
    p.add_argument("--pack", metavar="P",
                   help="model pack (default: the snapshot's own, else the chosen one)")
    p.add_argument("--question-encoder", metavar="M",
                   help="question encoder: hub id, folder or RAG checkpoint (overrides the pack)")
    p.add_argument("--generator", metavar="M",
                   help="generator: hub id, folder, RAG checkpoint or .gguf (overrides the pack)")
    p.add_argument("--mode", choices=("token", "sequence"), help="RAG-Token or RAG-Sequence")
    p.add_argument("--decoding", choices=("thorough", "fast"), help="RAG-Sequence decoding")
    p.add_argument("--docs", type=int, metavar="K", help="passages to retrieve")
    p.add_argument("--beams", type=int, metavar="N", help="beam size (1: greedy)")
    p.add_argument("--max-new-tokens", type=int, metavar="N", help="longest answer in tokens")
    p.add_argument("--retriever", choices=RETRIEVERS,
                   help="dense (the question encoder), sparse (BM25) or hybrid")
    add_answer_options(p)
    p.add_argument("--json", action="store_true",
                   help="print the answer, its tokens with sources, and the passages as JSON")
    p.set_defaults(func=cmd_ask)


def _setting(value: Any, ctx: AppContext, key: str, default: Any) -> Any:
    if value is not None:
        return value
    got = ctx.settings.get(key)
    return default if got is None else got


def cmd_ask(args: argparse.Namespace, ctx: AppContext) -> int:
    t_start = time.perf_counter()
    passive_openmp_waits()
    if not args.question.strip():
        raise BadInputError("The question is empty.", hint='Run ragdesk ask "your question".')
    from ragdesk.core.engine.generators import check_question

    # Bytes that are not UTF-8 (ragdesk ask $'\xff') arrive as lone surrogates: a clear
    # refusal (exit 2) now instead of a tokenizer TypeError after the models have loaded.
    check_question(args.question)
    mode = str(_setting(args.mode, ctx, "mode", "token"))
    decoding = str(_setting(args.decoding, ctx, "decoding", "thorough"))
    n_docs = int(_setting(args.docs, ctx, "n_docs", 5))
    beams = int(_setting(args.beams, ctx, "num_beams", 1))
    max_new = int(_setting(args.max_new_tokens, ctx, "max_new_tokens", 32))
    retriever = str(_setting(args.retriever, ctx, "retriever", "dense"))
    style = str(_setting(args.style, ctx, "style", DEFAULT_STYLE))
    grounded = grounded_setting(args.grounded, ctx)
    from ragdesk.core.engine.causal_decoder import default_precision

    precision = str(_setting(args.precision, ctx, PRECISION_KEY, None) or default_precision())

    # Everything that can be checked without a model is checked before one loads (loading the
    # starter pack takes seconds; a typo should not).
    from ragdesk.core.engine.causal_decoder import check_precision
    from ragdesk.core.engine.generators import check_style
    from ragdesk.core.engine.options import DecodeOptions
    from ragdesk.core.models.packs import check_pack_matches_snapshot, chosen_pack, get_pack
    from ragdesk.core.options import check_mode
    from ragdesk.core.retrieval import check_n_docs
    from ragdesk.core.snapshots import open_snapshot

    check_mode(mode, decoding)
    check_style(style)
    DecodeOptions(beams, max_new, 0).check()
    if retriever not in RETRIEVERS:
        raise BadInputError(f"Unknown retriever {retriever!r} in the settings.",
                            hint="Use --retriever dense, sparse or hybrid.")
    check_precision(precision)
    if n_docs < 1:
        raise BadInputError(f"--docs must be at least 1, not {n_docs}.")
    snapshot = open_snapshot(ctx.data, ctx.catalog, args.snapshot)  # none active, damaged
    check_n_docs(n_docs, snapshot)
    pack_name = (args.pack or ctx.catalog.get_snapshot(snapshot.name).default_pack
                 or chosen_pack(ctx.settings))
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
    t_checked = time.perf_counter()

    from ragdesk.core.engine import Engine
    from ragdesk.core.models.loading import load_generator, load_question_encoder
    from ragdesk.core.snapshots import SnapshotLibrary

    with _quiet_loading(args.verbose):
        encoder = load_question_encoder(qenc_ref)
        snapshot.check_query_encoder(encoder.info)
        t_enc = time.perf_counter()
        gen = load_generator(gen_ref, precision=precision)
    t_loaded = time.perf_counter()
    engine = Engine(encoder, gen, library=SnapshotLibrary(ctx.data, ctx.catalog),
                    snapshot=snapshot.name, owns_library=True)
    first: list[float] = []
    streamed: list[str] = []

    def on_token(tok: Any) -> None:
        if not first:
            first.append(time.perf_counter())
        if not args.json:
            streamed.append(tok.text)
            _stream_to_stdout(tok)

    try:
        t_ask = time.perf_counter()
        ans = engine.answer(args.question, mode=mode, decoding=decoding, n_docs=n_docs,
                            num_beams=beams, max_new_tokens=max_new, retriever=retriever,
                            snapshot=snapshot, on_token=on_token, style=style,
                            grounded=grounded, temperature=args.temperature)
        t_done = time.perf_counter()
    finally:
        engine.close()
        snapshot.close()
    if streamed:
        print(flush=True)  # end the streamed line before the timings go to stderr
    if args.verbose:
        t = ans.timings
        ttft = f"; first token after {first[0] - t_ask:.2f} s" if first else ""
        print(f"ragdesk: checks {t_checked - t_start:.2f} s; loaded the question encoder in "
              f"{t_enc - t_checked:.2f} s and the generator ({gen.kind}, {_precision_of(gen)}) "
              f"in {t_loaded - t_enc:.2f} s; answered in {t_done - t_ask:.2f} s (retrieval "
              f"{t.get('retrieve_s', 0):.2f} s, prompts {t.get('encode_s', 0):.2f} s, "
              f"decoding {t.get('decode_s', 0):.2f} s{ttft}); total "
              f"{time.perf_counter() - t_start:.2f} s", file=sys.stderr)
    if args.json:
        out = ans.to_json()
        out["pack"] = pack_name if pack is not None else None
        out["precision"] = _precision_of(gen)
        print_json(out)
        return 0
    if not streamed:
        print(terminal_safe(ans.text, newlines=True) or "(empty answer)")
    _print_sources(ans)
    return 0


def _precision_of(gen: Any) -> str:
    return str(getattr(gen, "precision", "float32"))


@contextlib.contextmanager
def _quiet_loading(verbose: int) -> Iterator[None]:
    """transformers draws a "Loading weights" progress bar for every model on stderr; the
    answer is what the user asked for, so the bars show only with -v."""
    if verbose:
        yield
        return
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def _stream_to_stdout(tok: Any) -> None:
    sys.stdout.write(terminal_safe(tok.text, newlines=True))
    sys.stdout.flush()


def _print_sources(ans: Any) -> None:
    what = "RAG-Token" if ans.mode == "token" else f"RAG-Sequence ({ans.decoding})"
    print(f"\n{what}, log p(answer) = {ans.logprob:.3f}, snapshot {terminal_safe(ans.snapshot)}, "
          f"p(z|x) temperature {ans.temperature:.4g}")
    if ans.tokens:
        marked = " ".join(f"{terminal_safe(t.text.strip()) or repr(t.text)}[{t.source + 1}]"
                          for t in ans.tokens)
        print(f"\nTokens [main source]: {marked}")
    print("\nSources:")
    for i, d in enumerate(ans.docs, 1):
        text = terminal_safe(" ".join(d.text.split()))
        short = text if len(text) <= 160 else text[:157] + "..."
        print(f"  [{i}] {terminal_safe(d.title)}  (p={d.prob:.3f}, score {d.score:.2f})")
        print(f"      {short}")
