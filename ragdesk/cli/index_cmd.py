"""`ragdesk index ...`: import, quantize, list, switch, verify and remove snapshots."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ragdesk.cli import calibrate_cmd
from ragdesk.cli.common import add_json_option, print_json, print_table
from ragdesk.core.errors import CorruptSnapshotError
from ragdesk.core.options import ENCODER_PRECISIONS
from ragdesk.core.progress import terminal_printer
from ragdesk.core.terminal_text import terminal_safe
from ragdesk.core.units import human_bytes, shown_time

if TYPE_CHECKING:
    import numpy as np

    from ragdesk.core.app import AppContext
    from ragdesk.core.encoders import EncoderPrecision
    from ragdesk.core.progress import ProgressCallback

IMPORT_EPILOG = """\
formats (detected from the file, or given with --format):
  jsonl           one {"title": ..., "text": ...} object per line ("id" optional)
  dpr-tsv         DPR's psgs_w100.tsv: header id<TAB>text<TAB>title, one passage per row
                  (also gzip-compressed, psgs_w100.tsv.gz, as is jsonl)
  parquet         passages in a parquet file: text, and optionally title and id columns
                  (needs pyarrow: pip install ragdesk[parquet])
  wiki-xml        a MediaWiki XML dump, .xml or .xml.bz2 (articles only, redirects skipped)
  vital-articles  the starter pack's Wikipedia Vital Articles: use SOURCE "vital-articles"
  docs            a FOLDER of PDF, DOCX, Markdown, HTML and text files (importing it again
                  picks up added, changed and deleted files, encoding only what changed)

Articles are split into non-overlapping 100-word passages, as DPR did.

examples:
  ragdesk index import vital-articles --name starter
      the offline starter snapshot (all-MiniLM-L6-v2 from the starter pack is the default
      encoder for this source)
  ragdesk index import psgs_w100.tsv --name wiki-2018 \\
      --encoder facebook/dpr-ctx_encoder-multiset-base --embeddings wiki_2018.npy
      precomputed passage vectors (row i = passage i) instead of encoding
  ragdesk index import psgs_w100.tsv.gz --name wiki-2018 \\
      --encoder facebook/dpr-ctx_encoder-multiset-base --embeddings wiki_2018_shards/
      a folder of .npy / parquet shards, rows placed by id, every id checked once
  ragdesk index import enwiki-20161220-pages-articles.xml.bz2 --name wiki-2016 \\
      --encoder facebook/dpr-ctx_encoder-single-nq-base

An interrupted import (Ctrl-C, crash, power cut) resumes from its last committed batch
when the same command is run again.
"""

QUANTIZE_EPILOG = """\
variants:
  flat      exact search over the stored embeddings (always present)
  hnsw-sq8  HNSW graph over 8-bit scalar-quantized vectors (the RAG paper's layout)
  ivf-pq    inverted lists of product-quantized codes: the smallest in memory

hnsw-sq8 and ivf-pq pick candidates; the best --rerank of them are re-scored exactly from
the memory-mapped embeddings, so returned scores are always exact inner products. Unless
--nprobe/--ef-search and --rerank are given, the cheapest setting that reaches
--target-recall is chosen: recall@20 against exact search, measured on --queries stand-in
questions made from sampled passages, or on real questions with --questions.

example:
  ragdesk index quantize starter --variant ivf-pq --make-default
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("index", help="manage index snapshots")
    isub = p.add_subparsers(dest="index_command", metavar="ACTION", required=True)

    ls = isub.add_parser("list", help="list snapshots")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=cmd_list)
    _register_import(isub)
    _register_quantize(isub)
    _register_small(isub)


def _register_import(isub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    imp = isub.add_parser("import", help="import a snapshot from passages or a Wikipedia dump",
                          epilog=IMPORT_EPILOG,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    imp.add_argument("source", metavar="SOURCE",
                     help='a file (JSONL, DPR TSV, MediaWiki XML/.xml.bz2, Vital Articles '
                     'JSON) or "vital-articles" for the starter pack\'s articles')
    imp.add_argument("--name", required=True, help="name of the new snapshot")
    imp.add_argument("--encoder", metavar="MODEL",
                     help="passage encoder: a Hugging Face model id in the local cache or a "
                     "model folder (DPR context encoder or sentence-transformers model); "
                     "defaults to the starter pack's all-MiniLM-L6-v2 for vital-articles, "
                     "which --encoder sentence-transformers/all-MiniLM-L6-v2 names for any "
                     "source")
    imp.add_argument("--format", dest="fmt",
                     choices=["jsonl", "dpr-tsv", "wiki-xml", "vital-articles", "parquet",
                              "docs"],
                     help="source format (default: detected)")
    imp.add_argument("--limit", type=int, metavar="N", help="import at most N passages")
    imp.add_argument("--embeddings", type=Path, metavar="NPY|DIR",
                     help="precomputed passage vectors instead of encoding: one .npy (row i "
                     "= passage i) or a folder of shards (.npy with NAME.ids.npy, or parquet "
                     "with id and embedding columns; id = the passage's position from 0)")
    imp.add_argument("--default-pack", metavar="PACK",
                     help="model pack to answer with when this snapshot is active")
    imp.add_argument("--precision", choices=list(ENCODER_PRECISIONS),
                     help="what the encoder computes the passages and the questions asked of "
                     "them in: float32 (the model's own forward, exact) or bfloat16 (about 3x "
                     "faster passages on CPUs with native bfloat16); default: float32 for DPR "
                     "encoders, bfloat16 passages and float32 questions for "
                     "sentence-transformers where the CPU has native bfloat16")
    imp.add_argument("--batch-size", type=int, default=64, metavar="N",
                     help="passages encoded per batch (default 64)")
    imp.add_argument("--json", action="store_true", help="print the new snapshot as JSON")
    imp.set_defaults(func=cmd_import)


def _register_quantize(isub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    q = isub.add_parser("quantize", help="build another index variant from the embeddings",
                        epilog=QUANTIZE_EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("name", metavar="NAME")
    q.add_argument("--variant", required=True, choices=["flat", "hnsw-sq8", "ivf-pq"])
    q.add_argument("--nlist", type=int, help="ivf-pq: number of inverted lists")
    q.add_argument("--m", type=int, help="ivf-pq: PQ sub-quantizers (bytes per vector at 8 "
                   "bits); must divide the dimension")
    q.add_argument("--nbits", type=int, help="ivf-pq: bits per sub-quantizer (default 8)")
    q.add_argument("--nprobe", type=int, help="ivf-pq: lists searched per query")
    q.add_argument("--on-disk", dest="ondisk", action="store_const", const=1,
                   help="ivf-pq: keep the inverted lists (the codes) in a file of their own "
                   "that is paged in as searched, for codes that do not fit in memory")
    q.add_argument("--hnsw-m", type=int, dest="M", help="hnsw-sq8: graph degree (default 32)")
    q.add_argument("--ef-construction", type=int, help="hnsw-sq8: build beam (default 80)")
    q.add_argument("--ef-search", type=int, help="hnsw-sq8: search beam")
    q.add_argument("--rerank", type=int, help="candidates re-scored exactly per query")
    q.add_argument("--target-recall", type=float, default=0.95,
                   help="recall@20 the tuner aims for (default 0.95)")
    q.add_argument("--queries", type=int, default=1000,
                   help="queries used to measure recall (default 1000)")
    q.add_argument("--questions", type=Path, metavar="JSONL",
                   help='tune on real questions: a JSONL file with a "question" per line '
                   "(e.g. NQ-open), instead of stand-ins made from the passages")
    q.add_argument("--question-encoder", metavar="MODEL",
                   help="encoder for --questions (default: the snapshot's encoder, for "
                   "sentence-transformers snapshots)")
    q.add_argument("--make-default", action="store_true",
                   help="search this snapshot with this variant from now on")
    q.add_argument("--json", action="store_true", help="print the result as JSON")
    q.set_defaults(func=cmd_quantize)


def _register_small(isub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """switch, verify, remove and the rest: a name and a few options each."""
    sw = isub.add_parser("switch", help="make a snapshot the active one")
    sw.add_argument("name", metavar="NAME")
    sw.add_argument("--variant", choices=["flat", "hnsw-sq8", "ivf-pq"],
                    help="also choose which of its index variants is searched")
    add_json_option(sw)
    sw.set_defaults(func=cmd_switch)

    v = isub.add_parser("verify", help="check a snapshot's checksums and that it answers")
    v.add_argument("name", metavar="NAME")
    v.add_argument("--json", action="store_true", help="print the report as JSON")
    v.set_defaults(func=cmd_verify)

    rm = isub.add_parser("remove", help="delete a snapshot (or one of its index variants)")
    rm.add_argument("name", metavar="NAME")
    rm.add_argument("--variant", choices=["hnsw-sq8", "ivf-pq"],
                    help="remove only this index variant")
    add_json_option(rm)
    rm.set_defaults(func=cmd_remove)

    calibrate_cmd.register(isub)


def _progress() -> ProgressCallback:
    return terminal_printer(sys.stderr)


def cmd_list(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.core.snapshots import recover
    from ragdesk.core.snapshots.manifest import recorded_precision

    recover(ctx.data, ctx.catalog)
    snaps = ctx.catalog.list_snapshots()
    made = {s.name: recorded_precision(ctx.data.snapshot_dir(s.slug)) for s in snaps}
    if args.json:
        print_json([{**s.to_json(), "precision": _json_or_none(made[s.name])} for s in snaps])
        return 0
    if not snaps:
        print("No snapshots yet. Import one with `ragdesk index import` (see --help).")
        return 0
    rows = []
    for s in snaps:
        variants = ", ".join(
            f"{v.variant} ({human_bytes(v.bytes)}"
            + (f", R@20 {v.recall_at_20:.3f}" if v.recall_at_20 is not None else "")
            + ")"
            for v in s.variants
        )
        state = s.state + (f": {s.error}" if s.error and s.state != "ready" else "")
        precision = made[s.name]
        rows.append(["*" if s.active else "", s.name, state, f"{s.passages:,}",
                     f"{s.encoder_id or '-'} ({s.dim or '-'}-d)",
                     precision.label() if precision is not None else "-", variants or "-",
                     shown_time(s.created_at)])
    print_table(["", "name", "state", "passages", "encoder", "precision", "variants",
                 "created"], rows)
    return 0


def _json_or_none(precision: EncoderPrecision | None) -> dict[str, str] | None:
    return None if precision is None else precision.to_json()


def cmd_import(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.core.snapshots import import_snapshot

    if args.fmt == "docs" or Path(args.source).is_dir():
        from ragdesk.cli.docs_import import import_docs  # a folder of documents

        return import_docs(args, ctx)

    rec = import_snapshot(ctx.data, ctx.catalog, args.source, name=args.name,
                          encoder=args.encoder, fmt=args.fmt, limit=args.limit,
                          embeddings=args.embeddings, default_pack=args.default_pack,
                          progress=_progress(), batch_size=args.batch_size,
                          precision=args.precision)
    if args.json:
        print_json(rec.to_json())
    else:
        active = " It is the active snapshot." if rec.active else ""
        print(f"Imported {rec.name!r}: {rec.passages:,} passages, encoder "
              f"{terminal_safe(rec.encoder_id)} ({rec.dim}-d).{active}")
    return 0


def cmd_quantize(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.core.snapshots import quantize_snapshot

    keys = ("nlist", "m", "nbits", "ondisk", "nprobe", "M", "ef_construction", "ef_search",
            "rerank")
    params = {k: getattr(args, k) for k in keys if getattr(args, k) is not None}
    vectors = _question_vectors(args, ctx) if args.questions else None
    res = quantize_snapshot(ctx.data, ctx.catalog, args.name, args.variant, params=params,
                            target_recall=args.target_recall, queries=args.queries,
                            make_default=args.make_default, query_vectors=vectors,
                            progress=_progress())
    if args.json:
        print_json(res.to_json())
    else:
        settings = ", ".join(f"{k}={v}" for k, v in sorted(res.params.items()))
        print(f"{res.snapshot}: {res.variant} built in {res.build_s:.1f}s, "
              f"{human_bytes(res.bytes)} ({res.bytes_per_passage:.1f} B/passage), "
              f"recall@20 {res.recall_at_20:.3f}" + (f" [{settings}]" if settings else ""))
    if res.warning:
        print(f"Warning: {res.warning}", file=sys.stderr)
    return 0


def _question_vectors(args: argparse.Namespace, ctx: AppContext) -> np.ndarray:
    from ragdesk.core.encoders import ST_FAMILY, load_encoder
    from ragdesk.core.errors import BadInputError
    from ragdesk.core.snapshots import open_snapshot
    from ragdesk.core.snapshots.quantize import read_question_texts

    index = open_snapshot(ctx.data, ctx.catalog, args.name, "flat")
    try:
        model = args.question_encoder
        if model is None:
            if index.encoder.family != ST_FAMILY:
                raise BadInputError(
                    f"The snapshot {args.name!r} was built with a DPR passage encoder; its "
                    "questions need the matching question encoder.",
                    hint="Pass --question-encoder MODEL.")
            model = index.encoder.id
        encoder = load_encoder(model, role="question")
        index.check_query_encoder(encoder.info)
    finally:
        index.close()
    texts = read_question_texts(args.questions, args.queries)
    return encoder.encode(texts, progress=_progress())


def cmd_switch(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.core.session import Session
    from ragdesk.core.snapshots import set_default_variant

    if args.variant:
        set_default_variant(ctx.data, ctx.catalog, args.name, args.variant)
    session = Session(ctx)
    try:
        index = session.library.switch(args.name)
        if args.json:
            print_json({"active": index.name, "passages": int(index.size),
                        "variant": index.variant})
            return 0
        print(f"Active snapshot: {terminal_safe(index.name)} ({index.size:,} passages, "
              f"{index.variant} index).")
    finally:
        session.close()
    return 0


def cmd_verify(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.core.snapshots import verify_snapshot

    report = verify_snapshot(ctx.data, ctx.catalog, args.name, progress=_progress(),
                             raise_on_error=not args.json)
    if args.json:
        print_json(report.to_json())
        return 0 if report.ok else CorruptSnapshotError.exit_code
    print(f"{terminal_safe(args.name)}: OK ({len(report.checked)} checks: "
          f"{', '.join(report.checked)}).")
    return 0


def cmd_remove(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.core.snapshots import remove_snapshot, remove_variant

    if args.variant:
        remove_variant(ctx.data, ctx.catalog, args.name, args.variant)
    else:
        remove_snapshot(ctx.data, ctx.catalog, args.name)
    if args.json:
        print_json({"removed": args.name, "variant": args.variant})
    elif args.variant:
        print(f"Removed the {args.variant} index of {terminal_safe(repr(args.name))}.")
    else:
        print(f"Removed snapshot {terminal_safe(repr(args.name))}.")
    return 0
