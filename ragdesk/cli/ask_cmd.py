"""`ragdesk ask "QUESTION"`: answer one question with numbered citations and per-token
sources."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ragdesk.cli.common import print_json
from ragdesk.core.errors import BadInputError
from ragdesk.core.options import DEFAULT_STYLE, STYLES

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
    p.add_argument("--style", choices=STYLES,
                   help="short (the answer alone) or sentence, for instruction-tuned generators")
    p.add_argument("--grounded", action=argparse.BooleanOptionalAction, default=None,
                   help="constrain the answer to spans of the passages")
    p.add_argument("--temperature", type=float, metavar="T",
                   help="retrieval temperature of p(z|x) (default: the snapshot's)")
    p.add_argument("--json", action="store_true",
                   help="print the answer, its tokens with sources, and the passages as JSON")
    p.set_defaults(func=cmd_ask)


def _setting(value: Any, ctx: AppContext, key: str, default: Any) -> Any:
    if value is not None:
        return value
    got = ctx.settings.get(key)
    return default if got is None else got


def cmd_ask(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.core.engine.api import engine_from_context

    if not args.question.strip():
        raise BadInputError("The question is empty.", hint='Run ragdesk ask "your question".')
    mode = str(_setting(args.mode, ctx, "mode", "token"))
    decoding = str(_setting(args.decoding, ctx, "decoding", "thorough"))
    n_docs = int(_setting(args.docs, ctx, "n_docs", 5))
    beams = int(_setting(args.beams, ctx, "num_beams", 1))
    max_new = int(_setting(args.max_new_tokens, ctx, "max_new_tokens", 32))
    retriever = str(_setting(args.retriever, ctx, "retriever", "dense"))
    style = str(_setting(args.style, ctx, "style", DEFAULT_STYLE))
    grounded = bool(_setting(args.grounded, ctx, "grounded", False))

    engine = engine_from_context(ctx, snapshot=args.snapshot,
                                 question_encoder=args.question_encoder,
                                 generator=args.generator, pack=args.pack)
    try:
        stream = None if args.json or not sys.stdout.isatty() else _stream_to_stdout
        ans = engine.answer(args.question, mode=mode, decoding=decoding, n_docs=n_docs,
                            num_beams=beams, max_new_tokens=max_new, retriever=retriever,
                            on_token=stream, style=style, grounded=grounded,
                            temperature=args.temperature)
    finally:
        engine.close()
    if args.json:
        print_json(ans.to_json())
        return 0
    if stream is not None:
        print()
    else:
        print(ans.text or "(empty answer)")
    _print_sources(ans)
    return 0


def _stream_to_stdout(tok: Any) -> None:
    sys.stdout.write(tok.text)
    sys.stdout.flush()


def _print_sources(ans: Any) -> None:
    what = "RAG-Token" if ans.mode == "token" else f"RAG-Sequence ({ans.decoding})"
    print(f"\n{what}, log p(answer) = {ans.logprob:.3f}, snapshot {ans.snapshot}, "
          f"p(z|x) temperature {ans.temperature:.4g}")
    if ans.tokens:
        marked = " ".join(f"{t.text.strip() or repr(t.text)}[{t.source + 1}]"
                          for t in ans.tokens)
        print(f"\nTokens [main source]: {marked}")
    print("\nSources:")
    for i, d in enumerate(ans.docs, 1):
        text = " ".join(d.text.split())
        short = text if len(text) <= 160 else text[:157] + "..."
        print(f"  [{i}] {d.title}  (p={d.prob:.3f}, score {d.score:.2f})")
        print(f"      {short}")
