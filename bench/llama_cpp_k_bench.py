"""K passages at once: ragdesk's prefill and RAG-Token step against llama.cpp on the same GGUF.

The paper's RAG-Token reads K passage rows: K prompts are processed, then every step runs the
K rows one token further and marginalizes their next-token distributions over the passages.
Both sides get the same K prompt token ids (ragdesk's tokenizer: its RAG prompt for one
question over K passages of 100 words) and take exactly ``--tokens`` greedy RAG-Token steps:

* ragdesk: its lean decoder's prefill (the prompts' shared start once, the rest packed), then
  the engine's own K-row steps (:class:`LeanCausalContext` and its rows, as an answer runs);
* llama.cpp (``llama-cpp-python``, the optional ``bench`` extra; skipped when absent): one
  context with K sequences, as a llama.cpp user batches them: the shared start decoded once
  on sequence 0 and copied to the others (``llama_memory_seq_cp``), the K tails in one
  batch; every step one batch of K tokens, one per sequence, with K rows of logits.

Both sides marginalize with the same code (ragdesk's RAG-Token marginal over the full
vocabulary, uniform p(z|x)), so a step's time is the K rows plus that marginalization. Rounds
alternate in one process; medians per side; ratio = ragdesk's time ÷ llama.cpp's.

Beside them, ragdesk's physical floors, measured in the same process: a step's bytes (the
weights its K-row products read, in the form they read them, and the K rows' keys and values)
÷ the measured memory read rate; the prefill's matmul FLOPs ÷ the measured bfloat16 matmul rate.

    RAGDESK_DATA_DIR=/path/to/data python -m bench.llama_cpp_k_bench [--rounds 4]
        [--tokens 32] [--passages 5] [--threads 2] [--llama-threads 1,2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from bench import machine, machine_line, md_table
from bench.llama_cpp_bench import (
    QUESTION,
    Round,
    add_arguments,
    alternate,
    bench_main,
    fastest_llama,
    gguf_path,
    openmp_line,
    summarize_sides,
)

PASSAGE_WORDS = 100
# the same decoder attending in float32, as before its keys, values and queries became
# bfloat16: what that change saves, measured in the same rounds
BEFORE = "ragdesk, attention in float32"


def _prompts(gen: Any, k: int) -> list[list[int]]:
    from ragdesk.core.engine.generators import PassageText
    from ragdesk.core.testing.tiny_models import sample_articles

    return [list(gen.input_ids(QUESTION, PassageText(title, " ".join(
        text.split()[:PASSAGE_WORDS])))) for title, text in sample_articles(k, seed=3)]


def _marginal(k: int) -> Any:
    import math

    import torch

    from ragdesk.core.engine.rag_token import Marginal

    return Marginal(torch.full((k,), -math.log(k)))


def _ragdesk_round(gen: Any, ids: list[list[int]], steps: int) -> Round:
    """(prefill seconds, seconds per K-row step with its marginalization, greedy tokens)."""
    import torch

    from ragdesk.core.engine.lean_causal_context import LeanCausalContext

    k = len(ids)
    marg = _marginal(k)
    gen.lean_decoder.forget_opening()  # no prompt cached from the round before
    t0 = time.perf_counter()
    ctx = LeanCausalContext(gen, gen.lean_decoder, ids)
    out = [int(marg(ctx.first_logits).argmax())]
    t1 = time.perf_counter()
    rows = ctx.rows(torch.arange(k), steps)
    for _ in range(steps):
        logits = rows.step(torch.tensor([out[-1]] * k))
        out.append(int(marg(logits).argmax()))
    t2 = time.perf_counter()
    return t1 - t0, (t2 - t1) / steps, out[:-1]


class LlamaRows:
    """K sequences in one llama.cpp context, driven by its batch API."""

    def __init__(self, llm: Any, k: int, n_ctx: int, threads: int) -> None:
        import llama_cpp
        from llama_cpp._internals import LlamaBatch, LlamaContext

        params = llama_cpp.llama_context_params.from_buffer_copy(llm.context_params)
        params.n_seq_max = k
        params.n_ctx = n_ctx
        params.n_batch = n_ctx
        params.n_ubatch = 512
        params.n_threads = params.n_threads_batch = threads
        params.kv_unified = True  # the shared start's cells serve every sequence
        self.ctx = LlamaContext(model=llm._model, params=params, verbose=False)
        self.batch = LlamaBatch(n_tokens=n_ctx, embd=0, n_seq_max=k, verbose=False)
        self.k = k
        self.n_vocab = llm.n_vocab()
        self.lens: list[int] = []  # each sequence's length so far

    def _logits(self, n: int) -> Any:
        import numpy as np
        import torch

        arr = np.ctypeslib.as_array(self.ctx.get_logits(), shape=(n, self.n_vocab))
        return torch.from_numpy(arr.copy())

    def _add(self, token: int, pos: int, seq: int, logits: bool) -> None:
        b = self.batch.batch
        j = b.n_tokens
        b.token[j], b.pos[j], b.n_seq_id[j], b.logits[j] = token, pos, 1, logits
        b.seq_id[j][0] = seq
        b.n_tokens = j + 1

    def prefill(self, ids: list[list[int]]) -> Any:
        """The K prompts; returns their last tokens' logits [K, V]."""
        import llama_cpp

        from ragdesk.core.engine.causal_decoder import common_prefix_len

        self.ctx.kv_cache_clear()
        shared = min(common_prefix_len(ids), min(len(p) for p in ids) - 1)
        if shared:
            self.batch.reset()
            for i, t in enumerate(ids[0][:shared]):
                self._add(t, i, 0, False)
            self.ctx.decode(self.batch)
            for z in range(1, self.k):
                llama_cpp.llama_memory_seq_cp(self.ctx.memory, 0, z, 0, shared)
        self.batch.reset()
        for z, p in enumerate(ids):
            for i in range(shared, len(p)):
                self._add(p[i], i, z, i == len(p) - 1)
        self.ctx.decode(self.batch)
        self.lens = [len(p) for p in ids]
        return self._logits(self.k)

    def step(self, token: int) -> Any:
        self.batch.reset()
        for z in range(self.k):
            self._add(token, self.lens[z], z, True)
            self.lens[z] += 1
        self.ctx.decode(self.batch)
        return self._logits(self.k)


def _llama_round(rows: LlamaRows, ids: list[list[int]], steps: int) -> Round:
    marg = _marginal(len(ids))
    t0 = time.perf_counter()
    out = [int(marg(rows.prefill(ids)).argmax())]
    t1 = time.perf_counter()
    for _ in range(steps):
        out.append(int(marg(rows.step(out[-1])).argmax()))
    t2 = time.perf_counter()
    return t1 - t0, (t2 - t1) / steps, out[:-1]


# ---------------------------------------------------------------------- the floors ----


def _best_time(fn: Any, repeats: int = 5) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def read_rate() -> float:
    """Bytes per second at which torch reads memory here: a sum over 1 GiB (far beyond the
    caches), best of a few."""
    import torch

    x = torch.ones(256 * 1024 * 1024, dtype=torch.float32)
    return x.numel() * 4 / _best_time(lambda: x.sum())


def matmul_rate(d_in: int, d_out: int, tokens: int) -> float:
    """bfloat16 FLOP/s of a ``[tokens, d_in] @ [d_in, d_out]`` product, as a prefill makes."""
    import torch
    import torch.nn.functional as F

    x = torch.randn(tokens, d_in, dtype=torch.bfloat16)
    w = torch.randn(d_out, d_in, dtype=torch.bfloat16)
    return 2 * tokens * d_in * d_out / _best_time(lambda: F.linear(x, w))


def _linears(dec: Any) -> list[Any]:
    return [lin for layer in dec.layers
            for lin in (*layer.qkv, *layer.gate_up, layer.o, layer.down)]


def step_bytes(dec: Any, rows: int, columns: int) -> int:
    """What one step of ``rows`` rows reads: each product's weight in the form it reads it
    for that many rows (its 4-bit or int8 copy, or the bfloat16 weight), and every row's keys
    and values over ``columns`` columns in every layer."""
    total = 0
    for lin in [dec.lm_head, *_linears(dec)]:
        copy = lin.copy_for(rows)
        if copy is not None:
            total += copy.nbytes
        else:
            total += int(lin.weight.numel() * lin.weight.element_size())
    kv = int(2 * rows * dec.kv_heads * columns * dec.head_dim * dec.kv_dtype.itemsize)
    return total + kv * len(dec.layers)


def prefill_flops(dec: Any, ids: list[list[int]]) -> float:
    """Matmul FLOPs of the K prompts' prefill as ragdesk runs it: the shared start once, the
    rest of every prompt; attention over each prompt's own columns; the output layer for the
    K last tokens."""
    from ragdesk.core.engine.causal_decoder import common_prefix_len

    shared = min(common_prefix_len(ids), min(len(p) for p in ids) - 1)
    tails = [len(p) - shared for p in ids]
    tokens = shared + sum(tails)
    per_token = sum(int(lin.weight.numel()) for lin in _linears(dec))
    q_dim = int(dec.heads * dec.head_dim)
    # q·k and p·v (2 products of 2 FLOPs per query, column and dimension); a token attends to
    # the columns before it: the shared start's among themselves, each tail's to that start
    # and to its own earlier tokens
    pairs = shared * shared / 2 + sum(t * (shared + t / 2) for t in tails)
    attention = len(dec.layers) * 2 * 2 * q_dim * pairs
    head = int(dec.lm_head.weight.numel()) * len(ids)
    return 2.0 * (per_token * tokens + head) + attention


def floors(dec: Any, ids: list[list[int]], steps: int) -> dict[str, float]:
    k = len(ids)
    mean_columns = max(map(len, ids)) + steps / 2
    bytes_ = step_bytes(dec, k, int(mean_columns))
    rate = read_rate()
    d = dec.embed.shape[1]
    mlp = dec.layers[0].down.weight.shape[1]
    tokens = sum(map(len, ids))
    mm = matmul_rate(d, 2 * mlp, tokens)
    flops = prefill_flops(dec, ids)
    return {"step_bytes": bytes_, "read_bytes_per_s": rate, "step_floor_s": bytes_ / rate,
            "prefill_flops": flops, "matmul_flops_per_s": mm, "prefill_floor_s": flops / mm}


# ----------------------------------------------------------------------- the rounds ----


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from ragdesk.core.models import load_generator

    gguf = gguf_path(args.gguf)
    torch.set_num_threads(args.threads)
    gen: Any = load_generator(gguf, precision=args.precision)
    dec = gen.lean_decoder
    if dec is None:
        raise SystemExit(f"{gguf} does not take ragdesk's lean decoder")
    from llama_cpp import Llama

    ids = _prompts(gen, args.passages)
    n_ctx = 256 * ((sum(map(len, ids)) + args.passages * (args.tokens + 8)) // 256 + 1)
    llm = Llama(model_path=str(gguf), n_ctx=512, verbose=False)
    llamas = {n: LlamaRows(llm, args.passages, n_ctx, n) for n in args.llama_threads}
    before = [BEFORE] if dec.kv_dtype != torch.float32 else []
    sides = ["ragdesk", *before] + [f"llama.cpp {n} thread{'s' * (n > 1)}" for n in llamas]

    def one(side: str, steps: int) -> Round:
        with torch.inference_mode():
            if side == "ragdesk":
                return _ragdesk_round(gen, ids, steps)
            if side == BEFORE:
                kv_dtype, dec.kv_dtype = dec.kv_dtype, torch.float32
                try:
                    return _ragdesk_round(gen, ids, steps)
                finally:
                    dec.kv_dtype = kv_dtype
            return _llama_round(llamas[int(side.split()[1])], ids, steps)

    runs, tokens = alternate(sides, one, args.rounds, args.tokens, "prefill")
    with torch.inference_mode():
        floor = floors(dec, ids, args.tokens)
    return {"gguf": str(gguf), "prompt_tokens": [len(p) for p in ids],
            "passages": args.passages, "tokens": args.tokens, "rounds": args.rounds,
            "threads": args.threads, "precision": gen.precision, "runs": runs,
            "greedy_tokens": tokens, "floors": floor, "machine": machine()}


def summarize(data: dict[str, Any]) -> dict[str, Any]:
    out = summarize_sides(data, "prefill")
    ours = out["ragdesk"]
    data["best_llama_step"] = fastest_llama(out, "step_ms")
    data["best_llama_prefill"] = fastest_llama(out, "prefill_s")
    f = data["floors"]
    data["step_vs_floor"] = ours["step_ms"] / 1000 / f["step_floor_s"]
    data["prefill_vs_floor"] = ours["prefill_s"] / f["prefill_floor_s"]
    return out


def render(data: dict[str, Any], summary: dict[str, Any]) -> str:
    k, f = data["passages"], data["floors"]
    head = (f"Gemma 3 270M, {Path(data['gguf']).name} for both; K = {k} prompts of "
            f"{min(data['prompt_tokens'])}-{max(data['prompt_tokens'])} tokens (identical ids), "
            f"then {data['tokens']} greedy RAG-Token steps of {k} rows, each marginalized over "
            f"the full vocabulary by the same code; ragdesk in {data['precision']} with "
            f"{data['threads']} torch thread{'s' * (data['threads'] > 1)}; medians of "
            f"{data['rounds']} alternating rounds in one process. Ratio = ragdesk ÷ that side.\n\n")
    table = md_table(
        ["side", f"K = {k} prefill (s)", "ragdesk ÷ side, prefill", "per step (ms)",
         "ragdesk ÷ side, per step", "greedy tokens equal to ragdesk's", "load average (median)"],
        [[side, f"{s['prefill_s']:.3f}", f"{s['prefill_ratio']:.2f}x", f"{s['step_ms']:.1f}",
          f"{s['step_ratio']:.2f}x", f"first {s['same_leading_tokens']} of {data['tokens']}",
          f"{s['load_median']:.2f}"] for side, s in summary.items()])
    step_best, prefill_best = data["best_llama_step"], data["best_llama_prefill"]
    tail = (
        f"\n\nK-row step: ragdesk takes **{summary[step_best]['step_ratio']:.2f}x** llama.cpp's "
        f"time at its best thread count ({step_best}); prefill "
        f"**{summary[prefill_best]['prefill_ratio']:.2f}x** ({prefill_best}).\n\n"
        f"Floors (ragdesk's own): a step reads {f['step_bytes'] / 1e6:.0f} MB at the measured "
        f"{f['read_bytes_per_s'] / 1e9:.1f} GB/s = {1000 * f['step_floor_s']:.1f} ms; the step "
        f"takes **{data['step_vs_floor']:.2f}x** that. The prefill's matmuls are "
        f"{f['prefill_flops'] / 1e9:.0f} GFLOP at the measured "
        f"{f['matmul_flops_per_s'] / 1e9:.0f} GFLOP/s (bfloat16) = "
        f"{f['prefill_floor_s']:.3f} s; the prefill takes **{data['prefill_vs_floor']:.2f}x** "
        f"that.\n\n"
        f"{openmp_line()} {machine_line(data['machine'])}\n")
    return head + table + tail


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    add_arguments(ap, tokens=32, results="llama_cpp_k")
    ap.add_argument("--passages", type=int, default=5, help="K, the passage rows")
    return bench_main(
        ap.parse_args(argv),
        "K passage rows: prefill and RAG-Token step against llama.cpp (same GGUF)",
        run, summarize, render)

if __name__ == "__main__":
    sys.exit(main())
