"""Causal-LM answer speed: the starter pack (Gemma 3 270M) against today's implementation.

One process, alternating rounds, 20 fixed questions (below; not from NQ), K = 5 passages
retrieved once per question from the starter snapshot (the same passages for every side),
exactly 16 new tokens (``min_new_tokens = max_new_tokens = 16``), 2 threads. Sides:

* ``reference``: the causal path as it was before the lean decoder, copied into this file
  (:class:`ReferenceContext` / :class:`ReferenceRows`: transformers' forward over the K
  left-padded prompts, the 262k-word output layer through ``F.linear``, cache copies per
  step), driven by ragdesk's own RAG-Token / RAG-Sequence loops;
* ``float32``: ragdesk's lean Gemma decoder in float32 (must give the reference's tokens);
* ``bfloat16``: the same decoder with bfloat16 linear layers and output layer (the fast path;
  tokens compared with float32);
* ``int8``: the same decoder with int8 weights and dynamically quantized activations (RAG-Token
  only, for comparison);
* ``floor.<precision>``: the physical floor of one answer with the same weights: the K
  prompts run once as one batch (the lean prefill) + greedy decoding of one row (16 tokens
  on one passage, no marginalization);

for RAG-Token greedy (with the time to the first streamed token) and RAG-Sequence fast
(greedy). Every round runs every side on every question, sides alternating question by
question, so that load from other processes hits all sides alike; a side's time is its sum
over the questions, and ratios are taken per round, then the median over rounds. As in
``engine_bench``, ``OMP_WAIT_POLICY=PASSIVE`` unless the environment sets it.

    python -m bench.causal_bench [--data-dir DIR] [--rounds 2] [--questions 20] [--no-write]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench import machine, machine_line, md_table, write_results

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

N_DOCS = 5
NEW_TOKENS = 16
FAST = "bfloat16"  # ragdesk.core.engine.causal_decoder.FAST_PRECISION
TARGETS = {
    "token_greedy_vs_reference": 0.35,
    "token_greedy_vs_floor": 1.3,
    "first_token_vs_reference": 0.35,
    "sequence_fast_vs_reference": 0.5,
}
QUESTIONS = [
    "who painted the mona lisa",
    "when did the berlin wall fall",
    "what is the capital of australia",
    "who wrote pride and prejudice",
    "what is the largest planet in the solar system",
    "who developed the theory of general relativity",
    "what is the chemical symbol for gold",
    "in which country is the taj mahal",
    "who was the first president of the united states",
    "what language is spoken in brazil",
    "when did the first world war begin",
    "what is the longest river in africa",
    "who composed the magic flute",
    "what is the boiling point of water in celsius",
    "which city hosted the 2008 summer olympics",
    "who discovered penicillin",
    "what is the currency of japan",
    "how many players are on a football team",
    "who was the greek god of the sea",
    "what gas do plants absorb from the air",
]


# ------------------------------------------------------------------ the reference ------
# ragdesk's causal path before the lean decoder (generators.py at commit a61ee69), kept here
# unchanged so that the bench measures against a fixed reference.


def _select_cache(cache: Any, rows: Any) -> Any:
    """A copy of a dynamic cache holding the given batch rows (the original is untouched)."""
    new = copy.copy(cache)
    new.layers = []
    for layer in cache.layers:
        lay = copy.copy(layer)
        if getattr(layer, "is_initialized", True) and getattr(layer, "keys", None) is not None:
            lay.keys = layer.keys.index_select(0, rows)
            lay.values = layer.values.index_select(0, rows)
        new.layers.append(lay)
    return new


class ReferenceContext:
    def __init__(self, gen: Any, ids: list[list[int]]) -> None:
        import torch

        self.gen = gen
        self.input_ids = ids
        self.n_docs = len(ids)
        length = max(len(x) for x in ids)
        pad = gen.settings.pad_token_id
        input_ids = torch.full((len(ids), length), pad, dtype=torch.long)
        mask = torch.zeros((len(ids), length), dtype=torch.long)
        for i, x in enumerate(ids):  # left padding: every prompt ends at the same column
            input_ids[i, length - len(x):] = torch.tensor(x, dtype=torch.long)
            mask[i, length - len(x):] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        dev = gen.device
        input_ids, mask, positions = input_ids.to(dev), mask.to(dev), positions.to(dev)
        self.mask = mask
        self.next_position = positions[:, -1] + 1
        kwargs: dict[str, Any] = {"logits_to_keep": 1} if gen._logits_to_keep else {}
        with torch.inference_mode():
            out = gen.model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                            use_cache=True, return_dict=True, **kwargs)
        self.cache = out.cache if hasattr(out, "cache") else out.past_key_values
        self.first_logits = out.logits[:, -1].to(device="cpu", dtype=torch.float32)

    def rows(self, passage_of_row: Any, max_steps: int = 64) -> ReferenceRows:
        return ReferenceRows(self, passage_of_row)


class ReferenceRows:
    def __init__(self, ctx: ReferenceContext, passage_of_row: Any) -> None:
        self.ctx = ctx
        self.passage_of_row = passage_of_row
        rows = passage_of_row.to(ctx.gen.device)
        self.cache = _select_cache(ctx.cache, rows)
        self.mask = ctx.mask.index_select(0, rows)
        self.position = ctx.next_position.index_select(0, rows)

    def step(self, tokens: Any) -> Any:
        import torch

        n = tokens.shape[0]
        dev = self.mask.device
        self.mask = torch.cat([self.mask, torch.ones((n, 1), dtype=torch.long, device=dev)],
                              dim=1)
        with torch.inference_mode():
            out = self.ctx.gen.model(input_ids=tokens.to(dev)[:, None], attention_mask=self.mask,
                                     position_ids=self.position[:, None], cache=self.cache,
                                     use_cache=True, return_dict=True)
        self.position = self.position + 1
        self.cache = out.cache if hasattr(out, "cache") else out.past_key_values
        return out.logits[:, -1].to(device="cpu", dtype=torch.float32)

    def reorder(self, order: Any) -> None:
        dev_order = order.to(self.mask.device)
        self.cache.reorder_cache(dev_order)
        self.mask = self.mask.index_select(0, dev_order)
        self.position = self.position.index_select(0, dev_order)
        self.passage_of_row = self.passage_of_row.index_select(0, order)


def reference_generator(model: Any, tokenizer: Any) -> Any:
    """A CausalLMGenerator (same prompts, settings and stop rule) that encodes through the
    reference context."""
    import inspect

    from ragdesk.core.engine import generators as G

    recase = len(inspect.signature(G.normalize_question).parameters) > 1

    class Reference(G.CausalLMGenerator):
        def prepare(self, question: str, passages: Sequence[Any],
                    *args: Any, **kwargs: Any) -> Any:
            # the prompts exactly as CausalLMGenerator.prepare builds them (the question
            # recased from the K passages), only the encoding is the reference's
            if recase:
                question = G.normalize_question(question, passages)
            return ReferenceContext(self, [self.input_ids(question, p, *args, **kwargs)
                                           for p in passages])

    return Reference(model, tokenizer, "reference", lean_decoder=False)


# ------------------------------------------------------------------ the sides ----------


@dataclass
class Run:
    seconds: float
    first_token_s: float | None
    tokens: list[int]
    text: str


def _answer(fn: Callable[..., Any], gen: Any, question: str, hits: list[Any],
            **kw: Any) -> Run:
    first: list[float] = []

    def on_token(_: Any) -> None:
        if not first:
            first.append(time.perf_counter())

    t0 = time.perf_counter()
    ans = fn(gen, question, hits, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
             on_token=on_token, **kw)
    dt = time.perf_counter() - t0
    return Run(dt, first[0] - t0 if first else None, list(ans.token_ids), ans.text)


def _floor(gen: Any, question: str, hits: list[Any]) -> Run:
    """The K prompts once as one batch + greedy decoding of one row, with ``gen``'s weights
    and decoder: what any answer over these K passages costs at least."""
    import torch

    from ragdesk.core.engine.generators import PassageText

    dec = gen.lean_decoder
    t0 = time.perf_counter()
    ids = [gen.input_ids(question, PassageText(h.title, h.text)) for h in hits]
    with torch.inference_mode():
        base, hidden, _ = dec.prefill(ids, gen.device)
        logits = dec.logits(hidden[:1])
        first = time.perf_counter()
        state = base.expand(torch.zeros(1, dtype=torch.long), NEW_TOKENS)
        out = [int(logits[0].argmax())]
        for _ in range(NEW_TOKENS - 1):
            h = dec.forward(torch.tensor([[out[-1]]], device=gen.device), state)
            out.append(int(dec.logits(h[:, -1])[0].argmax()))
    return Run(time.perf_counter() - t0, first - t0, out, "")


def _retrieve(engine: Any, questions: list[str]) -> tuple[list[list[Any]], float]:
    from ragdesk.core.types import Hit

    index = engine.snapshot_index()
    temperature = float(getattr(index, "temperature", 1.0) or 1.0)
    out = []
    for q in questions:
        docs = engine.retrieve(q, N_DOCS)
        out.append([Hit(d.id, d.title, d.text, d.score) for d in docs])
    return out, temperature


def run(args: argparse.Namespace) -> dict[str, Any]:
    import inspect

    import torch

    import ragdesk
    from ragdesk.core.engine.generators import CausalLMGenerator
    from ragdesk.core.engine.rag_token import rag_token_generate

    torch.set_num_threads(args.threads)
    start = machine()
    t0 = time.perf_counter()
    engine = ragdesk.load_engine(data_dir=args.data_dir)
    t_load = time.perf_counter() - t0
    loaded = engine.generator
    if getattr(loaded, "lean_decoder", None) is None:
        raise SystemExit(f"the generator {loaded.name!r} does not take the lean causal decoder")
    # The engine's generator runs at the CPU's default precision (bfloat16 where the CPU has
    # it natively): the float32 side is built explicitly on the same (float32) weights.
    f32 = CausalLMGenerator(loaded.model, loaded.tokenizer, loaded.name, precision="float32")
    assert f32.precision == "float32" and loaded.model.dtype == torch.float32
    t0 = time.perf_counter()
    bf16 = CausalLMGenerator(f32.model, f32.tokenizer, f32.name, precision="bfloat16")
    t_bf16 = time.perf_counter() - t0
    t0 = time.perf_counter()
    int8 = CausalLMGenerator(f32.model, f32.tokenizer, f32.name, precision="int8")
    t_pack = time.perf_counter() - t0
    ref = reference_generator(f32.model, f32.tokenizer)
    gens = {"reference": ref, "float32": f32, "bfloat16": bf16, "int8": int8}
    questions = QUESTIONS[:args.questions]
    hits, temperature = _retrieve(engine, questions)
    extra: dict[str, Any] = {}
    if "temperature" in inspect.signature(rag_token_generate).parameters:
        extra["temperature"] = temperature

    cases = _cases(gens, extra)
    order = list(cases)
    print(f"engine loaded in {t_load:.1f} s, bfloat16 copy in {t_bf16:.1f} s, int8 packed in "
          f"{t_pack:.1f} s; "
          f"{len(questions)} questions, {args.rounds} rounds", file=sys.stderr, flush=True)
    for name in order:  # warm-up: kernels chosen, memory allocated
        cases[name](questions[0], hits[0])
    totals, first_tok, outputs = _timed_rounds(cases, questions, hits, args.rounds)
    end = machine()
    return summarize(args, questions, totals, first_tok, outputs, start, end,
                     {"engine_load_s": t_load, "int8_pack_s": t_pack, "bfloat16_copy_s": t_bf16,
                      "temperature": temperature})


def _cases(gens: dict[str, Any], extra: dict[str, Any]
           ) -> dict[str, Callable[[str, list[Any]], Run]]:
    """What is timed, by name: RAG-Token and fast RAG-Sequence per side, and the floors."""
    from ragdesk.core.engine.rag_sequence import rag_sequence_generate
    from ragdesk.core.engine.rag_token import rag_token_generate

    def token(g: Any) -> Callable[[str, list[Any]], Run]:
        return lambda q, h: _answer(rag_token_generate, g, q, h, **extra)

    def sequence(g: Any) -> Callable[[str, list[Any]], Run]:
        return lambda q, h: _answer(rag_sequence_generate, g, q, h, decoding="fast", **extra)

    def floor(g: Any) -> Callable[[str, list[Any]], Run]:
        return lambda q, h: _floor(g, q, h)

    cases: dict[str, Callable[[str, list[Any]], Run]] = {}
    for side, g in gens.items():
        cases[f"token.{side}"] = token(g)
        if side != "int8":  # int8: RAG-Token only (for information; not the fast path)
            cases[f"sequence_fast.{side}"] = sequence(g)
    for side in ("float32", FAST):
        cases[f"floor.{side}"] = floor(gens[side])
    return cases


def _timed_rounds(cases: dict[str, Callable[[str, list[Any]], Run]], questions: list[str],
                  hits: list[list[Any]], rounds: int
                  ) -> tuple[dict[str, list[float]], dict[str, list[float]],
                             dict[str, list[Run]]]:
    """Seconds per round and side, median first-token times, and the first round's runs."""
    order = list(cases)
    totals: dict[str, list[float]] = {n: [] for n in order}
    first_tok: dict[str, list[float]] = {n: [] for n in order if n.startswith("token.")}
    outputs: dict[str, list[Run]] = {}
    for r in range(rounds):
        sums = dict.fromkeys(order, 0.0)
        firsts: dict[str, list[float]] = {n: [] for n in first_tok}
        for i, (q, h) in enumerate(zip(questions, hits, strict=True)):
            # rotate the order question by question: no side always runs first
            shift = (i + r) % len(order)
            for name in order[shift:] + order[:shift]:
                res = cases[name](q, h)
                sums[name] += res.seconds
                if name in firsts and res.first_token_s is not None:
                    firsts[name].append(res.first_token_s)
                if r == 0:
                    outputs.setdefault(name, []).append(res)
            print(f"round {r + 1} question {i + 1}/{len(questions)}: " + ", ".join(
                f"{n} {sums[n]:.1f}" for n in order), file=sys.stderr, flush=True)
        for n in order:
            totals[n].append(sums[n])
        for n in first_tok:
            first_tok[n].append(statistics.median(firsts[n]))
    return totals, first_tok, outputs


def summarize(args: argparse.Namespace, questions: list[str], totals: dict[str, list[float]],
              first_tok: dict[str, list[float]], outputs: dict[str, list[Run]],
              start: dict[str, Any], end: dict[str, Any],
              info: dict[str, Any]) -> dict[str, Any]:
    def ratio(a: str, b: str, src: dict[str, list[float]] = totals) -> float:
        return statistics.median(x / y for x, y in zip(src[a], src[b], strict=True))

    ratios: dict[str, float] = {}
    for p in ("float32", FAST, "int8"):
        ratios[f"token_greedy.{p}_vs_reference"] = ratio(f"token.{p}", "token.reference")
        ratios[f"first_token.{p}_vs_reference"] = ratio(f"token.{p}", "token.reference",
                                                        first_tok)
        if f"floor.{p}" in totals:
            ratios[f"token_greedy.{p}_vs_floor"] = ratio(f"token.{p}", f"floor.{p}")
        if f"sequence_fast.{p}" in totals:
            ratios[f"sequence_fast.{p}_vs_reference"] = ratio(f"sequence_fast.{p}",
                                                              "sequence_fast.reference")

    def same(a: str, b: str) -> int:
        return sum(x.tokens == y.tokens for x, y in zip(outputs[a], outputs[b], strict=True))

    def token_agreement(a: str, b: str) -> float:
        """Share of answer positions with the same token (up to the first difference every
        later token is conditioned on the same prefix; after it, on different ones)."""
        n = agree = 0
        for x, y in zip(outputs[a], outputs[b], strict=True):
            n += max(len(x.tokens), len(y.tokens))
            agree += sum(s == t for s, t in zip(x.tokens, y.tokens, strict=False))
        return agree / n if n else 1.0

    def common_prefix(a: str, b: str) -> float:
        """Mean number of leading tokens two sides' answers share (what decides an answer
        like "Leonardo da Vinci" before the forced continuation)."""
        lens = []
        for x, y in zip(outputs[a], outputs[b], strict=True):
            k = 0
            while k < min(len(x.tokens), len(y.tokens)) and x.tokens[k] == y.tokens[k]:
                k += 1
            lens.append(k)
        return statistics.mean(lens) if lens else 0.0

    agreement = {
        "token.fast_common_prefix_mean": common_prefix(f"token.{FAST}", "token.float32"),
        "token.int8_common_prefix_mean": common_prefix("token.int8", "token.float32"),
        "token.float32_same_as_reference": same("token.float32", "token.reference"),
        "sequence_fast.float32_same_as_reference": same("sequence_fast.float32",
                                                        "sequence_fast.reference"),
        "token.fast_same_as_float32": same(f"token.{FAST}", "token.float32"),
        "sequence_fast.fast_same_as_float32": same(f"sequence_fast.{FAST}",
                                                   "sequence_fast.float32"),
        "token.fast_token_agreement": token_agreement(f"token.{FAST}", "token.float32"),
        "token.int8_same_as_float32": same("token.int8", "token.float32"),
        "token.int8_token_agreement": token_agreement("token.int8", "token.float32"),
    }
    answers = [{"question": q, **{side: outputs[f"token.{side}"][i].text
                                  for side in ("reference", "float32", FAST, "int8")}}
               for i, q in enumerate(questions)]
    fast = FAST
    res: dict[str, Any] = {
        "model": "Gemma 3 270M (starter pack, GGUF Q4_K_M dequantized to float32)",
        "n_docs": N_DOCS, "new_tokens": NEW_TOKENS, "questions": len(questions),
        "rounds": args.rounds, "threads": args.threads,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "totals_s": totals, "median_total_s": {k: statistics.median(v)
                                               for k, v in totals.items()},
        "first_token_median_s": first_tok, "ratios": ratios, "targets": TARGETS,
        "fast_precision": fast, "agreement": agreement, "answers_round1": answers,
        "machine": start, "load_average_1min_at_end": end.get("load_average_1min"),
        **info,
    }
    checks = {
        "token_greedy_vs_reference": ratios[f"token_greedy.{fast}_vs_reference"],
        "token_greedy_vs_floor": ratios[f"token_greedy.{fast}_vs_floor"],
        "first_token_vs_reference": ratios[f"first_token.{fast}_vs_reference"],
        "sequence_fast_vs_reference": ratios[f"sequence_fast.{fast}_vs_reference"],
    }
    res["checks"] = checks
    res["meets_targets"] = bool(all(checks[k] <= v for k, v in TARGETS.items()) and
                                agreement["token.float32_same_as_reference"] == len(questions))
    return res


def render(r: dict[str, Any]) -> str:
    m = r["median_total_s"]
    ra = r["ratios"]
    ag = r["agreement"]
    n = r["questions"]
    ft = {k: statistics.median(v) for k, v in r["first_token_median_s"].items()}

    def per_q(key: str) -> str:
        return f"{m[key] / n:.2f}"

    f = r["fast_precision"]
    rows = [
        ["RAG-Token greedy", per_q("token.reference"), per_q("token.float32"),
         f"{ra['token_greedy.float32_vs_reference']:.2f}x", per_q(f"token.{f}"),
         f"**{ra[f'token_greedy.{f}_vs_reference']:.2f}x**", "<= 0.35x"],
        ["time to first token", f"{ft['token.reference']:.2f}", f"{ft['token.float32']:.2f}",
         f"{ra['first_token.float32_vs_reference']:.2f}x", f"{ft[f'token.{f}']:.2f}",
         f"**{ra[f'first_token.{f}_vs_reference']:.2f}x**", "<= 0.35x"],
        ["RAG-Sequence fast (greedy)", per_q("sequence_fast.reference"),
         per_q("sequence_fast.float32"), f"{ra['sequence_fast.float32_vs_reference']:.2f}x",
         per_q(f"sequence_fast.{f}"), f"**{ra[f'sequence_fast.{f}_vs_reference']:.2f}x**",
         "<= 0.5x"],
        ["physical floor (K prompts + 1 row)", "-", per_q("floor.float32"), "-",
         per_q(f"floor.{f}"), "-", "-"],
        ["RAG-Token greedy / its floor", "-", "-",
         f"{ra['token_greedy.float32_vs_floor']:.2f}x", "-",
         f"**{ra[f'token_greedy.{f}_vs_floor']:.2f}x**", "<= 1.3x"],
    ]
    verdict = "All targets met" if r["meets_targets"] else "NOT all targets met"
    lines = [
        "# Causal-LM answer speed (starter pack)",
        "",
        f"{r['model']}; K = {r['n_docs']} passages retrieved from the starter snapshot, exactly "
        f"{r['new_tokens']} new tokens, {r['threads']} threads, {n} fixed questions "
        f"(bench/causal_bench.py), medians of {r['rounds']} alternating rounds in one process. "
        "Seconds per answer (a side's total over the questions / "
        f"{n}); time to first token: median over the questions. The reference is ragdesk's "
        "causal path before the lean decoder (transformers' forward over left-padded prompts), "
        "kept in the bench; the floor is the K prompts run once as one batch plus greedy "
        "decoding of one row with the same weights.",
        "",
        md_table(["", "reference (s)", "float32 (s)", "ratio", f"{f} (s)", "ratio", "target"],
                 rows),
        "",
        f"Tokens: float32 gives the reference's answer on "
        f"{ag['token.float32_same_as_reference']}/{n} questions (RAG-Token) and "
        f"{ag['sequence_fast.float32_same_as_reference']}/{n} (RAG-Sequence). {f} gives "
        f"float32's answer on {ag['token.fast_same_as_float32']}/{n} (RAG-Token) and "
        f"{ag['sequence_fast.fast_same_as_float32']}/{n} (RAG-Sequence); "
        f"{100 * ag['token.fast_token_agreement']:.0f} % of its RAG-Token answer positions "
        "hold float32's token (every answer is forced to 16 tokens, so a late difference "
        f"counts too), and the two answers share their first "
        f"{ag['token.fast_common_prefix_mean']:.1f} tokens on average. int8 (weights and "
        "dynamically quantized activations), for comparison: "
        f"{per_q('token.int8')} s per RAG-Token answer "
        f"({ra['token_greedy.int8_vs_reference']:.2f}x), float32's answer on "
        f"{ag['token.int8_same_as_float32']}/{n}, "
        f"{100 * ag['token.int8_token_agreement']:.0f} % of positions, "
        f"{ag['token.int8_common_prefix_mean']:.1f} leading tokens shared: faster, but further "
        "from float32, so bfloat16 is the fast path. Whether it costs exact match is "
        "measured with `ragdesk eval --precision bfloat16` against `--precision float32`.",
        "",
        f"Start-up: engine loaded in {r['engine_load_s']:.1f} s; the bfloat16 copy of the "
        f"weights made in {r['bfloat16_copy_s']:.1f} s, the int8 weights packed in "
        f"{r['int8_pack_s']:.1f} s.",
        "",
        f"{verdict} (fast path = {r['fast_precision']}). The machine was shared: load average "
        f"{r['machine'].get('load_average_1min')} at the start and "
        f"{r['load_average_1min_at_end']} at the end, on {r['machine'].get('cores')} cores; "
        f"`OMP_WAIT_POLICY={r['omp_wait_policy']}` for every side.",
        "",
        machine_line(r["machine"]),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", help="ragdesk data directory with the starter pack "
                                       "(read only; default: ragdesk's)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--questions", type=int, default=len(QUESTIONS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args(argv)
    res = run(args)
    md = render(res)
    if not args.no_write:
        write_results("causal", res, md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
