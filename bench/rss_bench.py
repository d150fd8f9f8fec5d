"""Memory over many answers: does one process's RSS grow with each RAG-Sequence answer?

An earlier run measured about 65 KiB per answer over 200 answers with BART, too short a run to
tell a leak from the allocator settling. This runs ``--answers`` answers (default 1000) in
one process through the engine's public API (retrieval from a small snapshot imported with
the tiny DPR encoder, then RAG-Sequence with the tiny BART of ``tests/conftest.py``), every
question a new one (a cache keyed by the question would grow with real use too). After
``--warmup`` answers it samples RSS every ``--every`` answers (after ``gc.collect()``; with
``--trim`` also after glibc's ``malloc_trim(0)``, which separates freed-but-kept heap from
live objects), fits a least-squares slope and prints KiB per answer. ``--tracemalloc``
prints the Python allocations that grew most between the first sample and the last.

    OMP_NUM_THREADS=1 python -m bench.rss_bench [--answers 1000] [--decoding fast]
                                                [--tracemalloc] [--trim] [--write]

``--write`` adds the run to ``bench/results/rss.json`` and ``.md`` (one row per configuration,
for ``python -m bench.report``).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from bench import RESULTS_DIR, machine, machine_line, write_results

KIB = 1024


def rss_bytes() -> int:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except ImportError:  # /proc/self/statm: sizes in pages, resident second
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")


def malloc_trim() -> None:
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def slope_per_answer(xs: list[int], ys: list[int]) -> float:
    """Least-squares slope of ys (bytes) over xs (answers), in bytes per answer."""
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


def question(i: int, titles: list[str]) -> str:
    """A different question each time, made of the corpus' words (the tokenizer's BPE)."""
    a, b = titles[i % len(titles)], titles[(i * 7 + 3) % len(titles)]
    return f"what links {a} and {b} in the year {1000 + i}?"


def build_engine(root: Path, models: str) -> tuple[Any, list[str]]:
    """``ragdesk.load_engine`` over a 40-passage snapshot; ``models``: "parts" (the tiny
    DPR question encoder and BART) or "rag-checkpoint" (both from the tiny
    RagSequenceForGeneration checkpoint)."""
    from ragdesk import load_engine
    from ragdesk.core.app import AppContext
    from ragdesk.core.snapshots import import_snapshot
    from ragdesk.core.testing.tiny_models import build_tiny_models

    tiny = build_tiny_models(root / "models")
    app = AppContext(root / "data")
    src = root / "passages.jsonl"
    rows = [(t, " ".join(x.split()[:100])) for t, x in tiny.corpus[:40]]
    src.write_text("".join(json.dumps({"title": t, "text": x}) + "\n" for t, x in rows),
                   encoding="utf-8")
    import_snapshot(app.data, app.catalog, src, name="rss", encoder=str(tiny.ctx_encoder),
                    fmt="jsonl")
    app.catalog.set_active("rss")
    app.close()
    qenc, gen = ((tiny.question_encoder, tiny.bart) if models == "parts"
                 else (tiny.rag_sequence, tiny.rag_sequence))
    engine = load_engine(question_encoder=qenc, generator=gen, data_dir=root / "data")
    return engine, [t for t, _ in tiny.corpus[:200]]


def run(args: argparse.Namespace) -> dict[str, Any]:
    from ragdesk.core.options import AnswerOptions

    opts = AnswerOptions(mode="sequence", decoding=args.decoding, n_docs=args.docs,
                         num_beams=args.beams, max_new_tokens=args.max_new_tokens)
    with tempfile.TemporaryDirectory(prefix="rss-bench-") as tmp:
        engine, titles = build_engine(Path(tmp), args.models)
        xs: list[int] = []
        ys: list[int] = []
        first: Any = None
        t0 = time.perf_counter()
        for i in range(args.warmup + args.answers + 1):
            done = i - args.warmup
            if done >= 0 and done % args.every == 0:
                gc.collect()
                if args.trim:
                    malloc_trim()
                xs.append(done)
                ys.append(rss_bytes())
                if args.tracemalloc and first is None:
                    first = tracemalloc.take_snapshot()
                print(f"  {done:5d} answers  RSS {ys[-1] / KIB / KIB:8.1f} MiB", flush=True)
            if done == args.answers:
                break
            engine.ask(question(i, titles), opts)
        elapsed = time.perf_counter() - t0
        top = _grown(first) if first is not None else []
        engine.close()
    slope = slope_per_answer(xs, ys) / KIB
    print(f"RSS slope: {slope:+.2f} KiB/answer over {args.answers} answers "
          f"({elapsed / (args.warmup + args.answers) * 1000:.0f} ms/answer)")
    return {"answers": args.answers, "warmup": args.warmup, "every": args.every,
            "decoding": args.decoding, "models": args.models, "docs": args.docs,
            "beams": args.beams,
            "max_new_tokens": args.max_new_tokens, "trim": args.trim,
            "slope_kib_per_answer": round(slope, 3), "samples": list(zip(xs, ys, strict=True)),
            "tracemalloc_top": top, "load_average": os.getloadavg(), "machine": machine()}


def _grown(first: Any) -> list[str]:
    diff = tracemalloc.take_snapshot().compare_to(first, "lineno")
    lines = [str(d) for d in diff[:15]]
    print("Python allocations that grew most (tracemalloc):")
    for line in lines:
        print("  " + line)
    return lines


def label(r: dict[str, Any]) -> str:
    warm = f"after {r['warmup']} warm-up" if r["warmup"] else "no warm-up"
    return f"{r['models']}, {r['decoding']}, {r['answers']} answers {warm}"


def markdown(runs: dict[str, dict[str, Any]]) -> str:
    """The section for docs/benchmarks.md: one row per configuration measured."""
    rows = []
    for name, r in runs.items():
        first, last = r["samples"][0][1], r["samples"][-1][1]
        load = ", ".join(f"{v:.2f}" for v in r["load_average"])
        rows.append(f"| {name}, every {r['every']} | {first / KIB / KIB:.1f} → "
                    f"{last / KIB / KIB:.1f} | **{r['slope_kib_per_answer']:+.2f}** | {load} |")
    any_run = next(iter(runs.values()))
    return (f"# Memory over many answers\n\n"
            f"`python -m bench.rss_bench`: RAG-Sequence answers in one process through "
            f"`ragdesk.load_engine` (tiny DPR + tiny BART as two models, or both from the tiny "
            f"RagSequenceForGeneration checkpoint), K = {any_run['docs']}, "
            f"{any_run['beams']} beams, up to {any_run['max_new_tokens']} new tokens, every "
            "question a new one, retrieval from a 40-passage snapshot. RSS is sampled "
            "after the warm-up answers and then at regular steps, after `gc.collect()`; the "
            "slope is a least-squares fit. Without warm-up the fit includes what only the "
            "first answers allocate (lazy imports, first-use buffers, allocator arenas): "
            "the earlier 200-answer figure was of that kind.\n\n"
            "| models, decoding, answers, sampled | RSS first → last sample (MiB) | "
            "KiB per answer | load average (1, 5, 15 min) |\n|---|---|---|---|\n"
            + "\n".join(rows) + "\n\n"
            f"{machine_line(any_run['machine'])}\n")


def save(result: dict[str, Any]) -> None:
    """Add this run to ``bench/results/rss.json`` (one entry per configuration)."""
    path = RESULTS_DIR / "rss.json"
    runs: dict[str, dict[str, Any]] = {}
    if path.exists():
        runs = json.loads(path.read_text(encoding="utf-8")).get("runs", {})
    runs[label(result)] = result
    write_results("rss", {"runs": runs}, markdown(runs))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--answers", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--every", type=int, default=50)
    p.add_argument("--decoding", default="thorough", choices=["fast", "thorough"])
    p.add_argument("--docs", type=int, default=3)
    p.add_argument("--beams", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=8)
    p.add_argument("--models", default="parts", choices=["parts", "rag-checkpoint"])
    p.add_argument("--trim", action="store_true", help="malloc_trim(0) before each sample")
    p.add_argument("--tracemalloc", action="store_true")
    p.add_argument("--write", action="store_true", help="add the run to bench/results/rss.*")
    args = p.parse_args(argv)
    if args.tracemalloc:
        tracemalloc.start(4)
    result = run(args)
    if args.write:
        save(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
