"""`ragdesk encode PASSAGES --encoder E --out DIR`: passage vectors computed on a Ray cluster,
written as the embedding shards that `index import --embeddings DIR` takes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ragdesk.cli.common import add_json_option, print_json
from ragdesk.core.terminal_text import terminal_safe

if TYPE_CHECKING:
    from ragdesk.core.app import AppContext

FORMATS = ("jsonl", "dpr-tsv", "wiki-xml", "parquet", "vital-articles")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "encode", help="compute passage vectors on a Ray cluster (the distributed extra)",
        description="Encodes the passages of a source (any file `index import` reads, split "
                    "the same way) with ragdesk's passage encoder in a Ray Data actor pool and "
                    "writes embedding shards (NAME.npy + NAME.ids.npy) into DIR, for "
                    "`ragdesk index import SOURCE --embeddings DIR`. Running it again resumes: "
                    "finished shards are kept. Needs `pip install \"ragdesk[distributed]\"`.")
    p.add_argument("passages", metavar="PASSAGES", help="the passage source file")
    p.add_argument("--encoder", required=True, metavar="MODEL",
                   help="passage encoder: a model folder or a Hugging Face id in the cache of "
                        "every node")
    p.add_argument("--out", required=True, type=Path, metavar="DIR",
                   help="folder for the shards (created; a resumed job's folder)")
    p.add_argument("--format", dest="fmt", choices=FORMATS,
                   help="source format (default: detected)")
    p.add_argument("--ray-address", metavar="ADDR",
                   help="a running cluster's address (HOST:6379), used as given; one where "
                        "no Ray answers fails within seconds. Default: start a local cluster "
                        "for this job, every process listening on 127.0.0.1 only")
    p.add_argument("--actors", type=int, default=1, metavar="N",
                   help="encoder actors, each loading the model once (default: 1)")
    p.add_argument("--gpus-per-actor", type=float, default=0.0, metavar="G",
                   help="GPUs per actor; above 0 the encoder runs on CUDA (default: 0)")
    p.add_argument("--batch-size", type=int, default=64, metavar="B",
                   help="passages per forward pass (default: 64)")
    p.add_argument("--dtype", choices=("float32", "float16"), default="float32",
                   help="vector precision in the shards (float16 halves the disk; default: "
                        "float32)")
    p.add_argument("--shard-size", type=int, default=10_000, metavar="ROWS",
                   help="passages per shard: the unit of work and of resuming "
                        "(default: 10000)")
    add_json_option(p)
    p.set_defaults(func=cmd_encode)


def cmd_encode(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.core.distributed.job import EncodeOptions, encode_passages
    from ragdesk.core.progress import terminal_printer

    opts = EncodeOptions(
        source=args.passages, encoder=args.encoder, out=args.out.expanduser().resolve(),
        fmt=args.fmt, ray_address=args.ray_address, actors=args.actors,
        gpus_per_actor=args.gpus_per_actor, batch_size=args.batch_size, dtype=args.dtype,
        shard_rows=args.shard_size)
    report = encode_passages(opts, progress=terminal_printer(sys.stderr))
    if args.json:
        print_json(report.to_json())
        return 0
    rate = report.passages_per_s
    print(f"{report.shards:,} shards of {report.passages:,} passages in "
          f"{terminal_safe(report.out)}: {report.written:,} written now, {report.skipped:,} "
          f"finished before" + (f"; {rate:,.1f} passages/s with {report.actors} actors"
                                if rate else "") + ".")
    print(f"Import them with: ragdesk index import {terminal_safe(args.passages)} --name NAME "
          f"--encoder {terminal_safe(args.encoder)} --embeddings {terminal_safe(report.out)}")
    return 0
