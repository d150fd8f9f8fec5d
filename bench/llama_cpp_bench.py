"""One-row greedy decoding: ragdesk's lean decoder against llama.cpp on the same GGUF.

llama.cpp (``llama-cpp-python``, the optional ``bench`` extra; skipped when it is not
installed) runs the starter pack's Gemma 3 270M Q4_K_M file as it is; ragdesk runs the same
file through its own loading (dequantized, then its default precision: bfloat16 where the
CPU has it). Both get the same prompt token ids (ragdesk's tokenizer: a RAG prompt over one
passage, about 250 tokens), process it, then take exactly ``--tokens`` greedy steps of one
row (argmax of the full vocabulary's logits, EOS or not). Rounds alternate in one process:
ragdesk, then llama.cpp at each thread count asked for; medians per side. Ratio = ragdesk's
time ÷ llama.cpp's (below 1: ragdesk is faster). The 1-minute load average is printed with
every round: on a shared machine it says how far a figure can be trusted.

    RAGDESK_DATA_DIR=/path/to/data python -m bench.llama_cpp_bench [--rounds 4]
        [--tokens 64] [--threads 2] [--llama-threads 1,2]

On a CPU with AMX, llama.cpp's native build enables its AMX kernels, and 0.3.36's crashed in
its first decode of this file; build it without the native detection instead (see
docs/benchmarks.md, "On an Intel Xeon with AMX", for the flags).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import machine, machine_line, md_table, write_results

QUESTION = "who wrote the novel pride and prejudice"
# one round of one side: (seconds of its prompt part, seconds per step, greedy tokens)
Round = tuple[float, float, list[int]]


def gguf_path(path: str | None) -> Path:
    if path is not None:
        return Path(path)
    from ragdesk.core.models import starter
    from ragdesk.core.paths import DataDir

    return starter.gguf_path(DataDir.resolve(None))


PLAIN = "ragdesk, bfloat16 only (no int8 or 4-bit copies)"


def _prompt(gen: Any) -> list[int]:
    from ragdesk.core.engine.generators import PassageText
    from ragdesk.core.testing.tiny_models import sample_articles

    title, text = sample_articles(1, seed=3)[0]
    return list(gen.input_ids(QUESTION, PassageText(title, " ".join(text.split()[:100]))))


def _ragdesk_round(gen: Any, ids: list[int], steps: int) -> Round:
    """(prompt seconds, seconds per decoded token, greedy tokens) of the lean decoder."""
    import torch

    dec = gen.lean_decoder
    dec.forget_opening()  # no prompt cached from the round before
    with torch.inference_mode():
        t0 = time.perf_counter()
        base, hidden, _ = dec.prefill([ids], gen.device)
        out = [int(dec.logits(hidden[:1])[0].argmax())]
        t1 = time.perf_counter()
        state = base.expand(torch.zeros(1, dtype=torch.long), steps)
        for _ in range(steps):
            h = dec.forward(torch.tensor([[out[-1]]], device=gen.device), state)
            out.append(int(dec.logits(h[:, -1])[0].argmax()))
        t2 = time.perf_counter()
    return t1 - t0, (t2 - t1) / steps, out[:-1]


def _llama_round(llm: Any, ids: list[int], steps: int, threads: int) -> Round:
    """The same for llama.cpp: the prompt in one evaluation, then one token per step."""
    import numpy as np

    llm._ctx.set_n_threads(threads, threads)

    def argmax() -> int:
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
        return int(logits.argmax())

    llm.reset()
    t0 = time.perf_counter()
    llm.eval(ids)
    out = [argmax()]
    t1 = time.perf_counter()
    for _ in range(steps):
        llm.eval([out[-1]])
        out.append(argmax())
    t2 = time.perf_counter()
    return t1 - t0, (t2 - t1) / steps, out[:-1]


def _load(args: argparse.Namespace, gguf: Path) -> tuple[Any, dict[int, Any]]:
    import llama_cpp  # noqa: F401  (checked by main before anything is loaded)
    import torch

    from ragdesk.core.models import load_generator

    torch.set_num_threads(args.threads)
    gen = load_generator(gguf, precision=args.precision)
    if getattr(gen, "lean_decoder", None) is None:
        raise SystemExit(f"{gguf} does not take ragdesk's lean decoder")
    from llama_cpp import Llama

    llms = {n: Llama(model_path=str(gguf), n_ctx=1024, n_batch=512, n_threads=n,
                     n_threads_batch=n, logits_all=False, verbose=False)
            for n in args.llama_threads}
    return gen, llms


def run(args: argparse.Namespace) -> dict[str, Any]:
    gguf = gguf_path(args.gguf)
    gen, llms = _load(args, gguf)
    ids = _prompt(gen)
    dec = gen.lean_decoder
    linears = [dec.lm_head] + [lin for layer in dec.layers
                               for lin in (*layer.qkv, *layer.gate_up, layer.o, layer.down)]
    copies = [(lin.rows, lin.groups) for lin in linears]
    # the same decoder with every product in bfloat16: what the int8 and 4-bit copies save,
    # measured in the same rounds
    plain = [PLAIN] if any(c != (None, None) for c in copies) else []
    sides = ["ragdesk", *plain] + [f"llama.cpp {n} thread{'s' * (n > 1)}" for n in llms]

    def one(side: str, steps: int) -> Round:
        if side == "ragdesk":
            return _ragdesk_round(gen, ids, steps)
        if side == PLAIN:
            for lin in linears:
                lin.rows = lin.groups = None
            try:
                return _ragdesk_round(gen, ids, steps)
            finally:
                for lin, (rows, groups) in zip(linears, copies, strict=True):
                    lin.rows, lin.groups = rows, groups
        n = int(side.split()[1])
        return _llama_round(llms[n], ids, steps, n)

    rows, tokens = alternate(sides, one, args.rounds, args.tokens, "prompt")
    return {"gguf": str(gguf), "prompt_tokens": len(ids), "tokens": args.tokens,
            "rounds": args.rounds, "threads": args.threads, "precision": gen.precision,
            "runs": rows, "greedy_tokens": tokens, "machine": machine()}


def alternate(sides: list[str], one: Callable[[str, int], Round], rounds: int, steps: int,
              first: str) -> tuple[dict[str, list[tuple[float, float, float]]],
                                   dict[str, list[int]]]:
    """Every side once untimed (first calls pick and prepare their kernels), then ``rounds``
    rounds of every side in turn, each ``one(side, steps)``: (its ``first`` part's seconds,
    seconds per step, load average) per side and round, and each side's greedy tokens."""
    for side in sides:
        one(side, 2)
    runs: dict[str, list[tuple[float, float, float]]] = {s: [] for s in sides}
    tokens: dict[str, list[int]] = {}
    for r in range(rounds):
        for side in sides:
            load = os.getloadavg()[0]
            first_s, step_s, out = one(side, steps)
            runs[side].append((first_s, step_s, load))
            tokens.setdefault(side, out)
            print(f"round {r + 1} {side}: {first} {first_s:.3f} s, {1000 * step_s:.1f} ms per "
                  f"step (load {load:.2f})", flush=True)
    return runs, tokens


def summarize_sides(data: dict[str, Any], first: str) -> dict[str, Any]:
    """Per side: the medians of its ``first`` part (``<first>_s``), of a step (``step_ms``)
    and of the load; ragdesk's time ÷ the side's for both; how many leading greedy tokens
    equal ragdesk's."""
    out: dict[str, Any] = {}
    for side, runs in data["runs"].items():
        out[side] = {f"{first}_s": statistics.median(r[0] for r in runs),
                     "step_ms": 1000 * statistics.median(r[1] for r in runs),
                     "load_median": statistics.median(r[2] for r in runs)}
    ours = out["ragdesk"]
    for s in out.values():
        s["step_ratio"] = ours["step_ms"] / s["step_ms"]
        s[f"{first}_ratio"] = ours[f"{first}_s"] / s[f"{first}_s"]
    ref = data["greedy_tokens"]["ragdesk"]
    for side, toks in data["greedy_tokens"].items():
        out[side]["same_leading_tokens"] = next(
            (i for i, (a, b) in enumerate(zip(ref, toks, strict=False)) if a != b),
            min(len(ref), len(toks)))
    return out


def fastest_llama(summary: dict[str, Any], key: str) -> str:
    """The llama.cpp side (thread count) with the smallest ``key``."""
    return min((s for s in summary if s.startswith("llama.cpp")),
               key=lambda s: float(summary[s][key]))


def summarize(data: dict[str, Any]) -> dict[str, Any]:
    out = summarize_sides(data, "prompt")
    data["best_llama"] = fastest_llama(out, "step_ms")
    return out


def render(data: dict[str, Any], summary: dict[str, Any]) -> str:
    head = (f"Gemma 3 270M, {Path(data['gguf']).name} for both; one prompt of "
            f"{data['prompt_tokens']} tokens (identical ids), then {data['tokens']} greedy steps "
            f"of one row; ragdesk in {data['precision']} with {data['threads']} torch "
            f"thread{'s' * (data['threads'] > 1)}; "
            f"medians of {data['rounds']} alternating rounds in one process. Ratio = ragdesk "
            "÷ that side (1.00x on ragdesk's own row).\n\n")
    table = md_table(
        ["side", "prompt (s)", "prompt tokens/s", "per token (ms)", "ragdesk ÷ side, "
         "per token", "ragdesk ÷ side, prompt", "greedy tokens equal to ragdesk's",
         "load average (median)"],
        [[side, f"{s['prompt_s']:.3f}", f"{data['prompt_tokens'] / s['prompt_s']:.0f}",
          f"{s['step_ms']:.1f}", f"{s['step_ratio']:.2f}x", f"{s['prompt_ratio']:.2f}x",
          f"first {s['same_leading_tokens']} of {data['tokens']}", f"{s['load_median']:.2f}"]
         for side, s in summary.items()])
    best = data["best_llama"]
    tail = (f"\n\nOne-row decoding: ragdesk takes **{summary[best]['step_ratio']:.2f}x** "
            f"llama.cpp's time per token at its best thread count here ({best}).\n\n"
            f"{openmp_line()} {machine_line(data['machine'])}\n")
    return head + table + tail


def add_arguments(ap: argparse.ArgumentParser, *, tokens: int, results: str) -> None:
    """The options both llama.cpp benches take (``tokens``: the default steps per round;
    ``results``: the default name of the bench/results files)."""
    ap.add_argument("--gguf", help="the GGUF file (default: the starter pack's, in "
                    "$RAGDESK_DATA_DIR)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=tokens, help="greedy steps per round")
    ap.add_argument("--threads", type=int, default=2, help="ragdesk's torch threads")
    ap.add_argument("--llama-threads", type=lambda s: [int(x) for x in s.split(",")],
                    default=[1, 2], help="llama.cpp thread counts, e.g. 1,2")
    ap.add_argument("--precision", default=None,
                    help="ragdesk's generator precision (default: the CPU's default)")
    ap.add_argument("--results", default=results,
                    help=f"name of the bench/results files (default {results})")


def openmp_line() -> str:
    """The OpenMP waits both sides ran with (the app's, :func:`prepare_for_models`)."""
    policy, spins = os.environ.get("OMP_WAIT_POLICY"), os.environ.get("GOMP_SPINCOUNT")
    return f"`OMP_WAIT_POLICY={policy}`, `GOMP_SPINCOUNT={spins}` for both sides (the app's)."


def bench_main(args: argparse.Namespace, title: str,
               run: Callable[[argparse.Namespace], dict[str, Any]],
               summarize: Callable[[dict[str, Any]], dict[str, Any]],
               render: Callable[[dict[str, Any], dict[str, Any]], str]) -> int:
    """Run, summarize, write bench/results and print; skipped without llama-cpp-python."""
    from ragdesk.core.cpu import prepare_for_models

    prepare_for_models()  # as the app runs: before either side starts its OpenMP threads
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        print("llama-cpp-python is not installed (pip install ragdesk[bench]); skipped.")
        return 0
    data = run(args)
    summary = summarize(data)
    data["summary"] = summary
    md = f"# {title}\n\n" + render(data, summary)
    write_results(args.results, data, md)
    print(md)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    add_arguments(ap, tokens=64, results="llama_cpp")
    return bench_main(ap.parse_args(argv), "One-row greedy decoding against llama.cpp (same GGUF)",
                      run, summarize, render)


if __name__ == "__main__":
    sys.exit(main())
