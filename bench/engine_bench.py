"""RAG decoding speed: ragdesk's engine against transformers' RAG classes in one process.

Models: a random BART-large-sized generator (12 + 12 layers, d_model 1024, 16 heads, FFN
4096) over a byte-level BPE vocabulary of about 16k trained on Wikipedia text (the Vital
Articles lead sections), K = 5 passages of 100 words, a fixed answer length of 20 tokens
(``min_new_tokens = max_new_tokens = 20``), 2 CPU threads. Every timed ragdesk run must give
the same tokens as the reference run next to it.

References, fed what ``RagRetriever`` produces (``context_input_ids`` padded to 300 tokens,
``context_attention_mask``, ``doc_scores``):

* ``RagTokenForGeneration.generate``, greedy and 4 beams;
* ``RagSequenceForGeneration.generate`` (thorough decoding), 4 beams. Its candidate search
  calls the generator without an attention mask, so with padded inputs it reads the padding
  as text (a transformers bug that ragdesk does not copy). To compare tokens, the five
  passages are trimmed to the same token length and both sides get them unpadded; this only
  makes the reference faster than with padding, so the ratio is conservative. The padded
  reference is timed once as well, for information;
* the physical floor of RAG-Token greedy: encoding the 5 passages once (unpadded) plus plain
  ``BartForConditionalGeneration.generate`` greedy over one passage.

Rounds alternate reference / ragdesk so that load from other processes hits both alike;
medians are compared. The load average is written with the results. On a loaded machine,
OpenMP threads that spin while they wait for each other make every 2-thread operation several
times slower (measured here: a [5, 1024] x [1024, 4096] product 3.5x slower with 2 spinning
threads than with 1); the script therefore sets ``OMP_WAIT_POLICY=PASSIVE`` unless the
environment sets it, for both sides alike, and records it.

``--k-sweep 1 2 5 10`` adds decoding time against the number of passages K (RAG-Token greedy
and RAG-Sequence thorough with 4 beams, both sides, ``--sweep-rounds`` rounds each) and its
plots; with ``--sweep-only`` it skips the K = 5 comparison and adds the sweep to the
results already written. ``--layers`` / ``--d-model`` make a smaller model (the results say
which model each part used).

    python -m bench.engine_bench [--rounds 3] [--layers 12] [--d-model 1024] [--quick]
                                 [--k-sweep 1 2 5 10 [--sweep-rounds 1] [--sweep-only]]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench import RESULTS_DIR, machine, machine_line, md_table, starter_passages, write_results

# must be set before torch starts its OpenMP threads (see the module docstring)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

TARGETS = {
    "token_greedy_vs_reference": 0.67,
    "sequence_beam4_vs_reference": 0.25,
    "token_greedy_vs_floor": 1.3,
}
N_DOCS = 5
NEW_TOKENS = 20
QUESTION = "who founded the city and when did it become the capital of the country"


def build_tokenizer(vocab_size: int) -> Any:
    from ragdesk.core.testing.tiny_models import bart_tokenizer, sample_articles, train_bpe

    texts = [t for _, t in sample_articles(20_000)]
    vocab, merges = train_bpe(texts, vocab_size)
    return bart_tokenizer(vocab, merges)


def build_bart(tok: Any, layers: int, d_model: int, seed: int) -> Any:
    import torch
    from transformers import BartConfig, BartForConditionalGeneration

    cfg = BartConfig(
        vocab_size=len(tok), d_model=d_model, encoder_layers=layers, decoder_layers=layers,
        encoder_attention_heads=max(1, d_model // 64),
        decoder_attention_heads=max(1, d_model // 64),
        encoder_ffn_dim=4 * d_model, decoder_ffn_dim=4 * d_model, max_position_embeddings=1024,
        pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, decoder_start_token_id=tok.eos_token_id,
        forced_bos_token_id=None, forced_eos_token_id=tok.eos_token_id,
        # larger than BART's 0.02 so that the next-token scores are far from ties: equal
        # tokens then test the algorithm, not float rounding
        init_std=0.1,
    )  # type: ignore[call-arg]
    torch.manual_seed(seed)
    return BartForConditionalGeneration(cfg).eval()


def build_reference(bart: Any, seed: int) -> tuple[Any, Any]:
    """RAG-Token and RAG-Sequence models around the same generator object (the question
    encoder is a small DPR: generation gets ``doc_scores`` and never calls it)."""
    import torch
    from transformers import (
        DPRConfig,
        DPRQuestionEncoder,
        RagConfig,
        RagSequenceForGeneration,
        RagTokenForGeneration,
    )

    torch.manual_seed(seed)
    q = DPRQuestionEncoder(DPRConfig(vocab_size=1000, hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=64)).eval()
    cfg = RagConfig.from_question_encoder_generator_configs(q.config, bart.config,
                                                            n_docs=N_DOCS)
    rt = RagTokenForGeneration(config=cfg, question_encoder=q, generator=bart).eval()
    rs = RagSequenceForGeneration(config=cfg, question_encoder=q, generator=bart).eval()
    return rt, rs


def equal_length_passages(tok: Any, question: str, target: int,
                          n: int = N_DOCS) -> list[tuple[str, str]]:
    """``n`` 100-word passages trimmed so that every generator input is ``target`` tokens
    (the first ones are the same whatever ``n``)."""
    from ragdesk.core.engine.generators import rag_input_text

    out: list[tuple[str, str]] = []
    every = starter_passages()
    for title, text in every[::97] + every[48::97]:
        if len(text.split()) < 100:
            continue
        ids = tok(text, add_special_tokens=False)["input_ids"]
        for m in range(len(ids), max(0, len(ids) - 40), -1):
            cut = tok.decode(ids[:m]).strip()
            if len(tok(rag_input_text(title, cut, question))["input_ids"]) == target:
                out.append((title, cut))
                break
        if len(out) == n:
            return out
    raise RuntimeError("could not find passages of equal token length")


def context_inputs(tok: Any, rag_config: Any, question: str,
                   passages: list[tuple[str, str]]) -> tuple[Any, Any]:
    """What ``RagRetriever.postprocess_docs`` gives the reference (padded to 300)."""
    from transformers.models.rag.retrieval_rag import RagRetriever

    fake = types.SimpleNamespace(config=rag_config, generator_tokenizer=tok)
    docs = [{"title": [t for t, _ in passages], "text": [x for _, x in passages]}]
    ids, mask = RagRetriever.postprocess_docs(fake, docs, [question], None, len(passages),  # type: ignore[arg-type]
                                              return_tensors="pt")
    return ids, mask


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


@dataclass
class Setup:
    """The models and inputs shared by every case."""

    tok: Any
    bart: Any
    rt: Any
    rs: Any
    gen: Any
    target: int  # generator input tokens of every passage
    passages: list[tuple[str, str]]  # the most passages any case uses
    scores: list[float]
    layers: int
    d_model: int

    def strip(self, seq: Any) -> list[int]:
        special = self.gen.special_ids
        return [int(t) for t in seq[1:].tolist() if int(t) not in special]

    def cases(self, k: int) -> dict[str, dict[str, Callable[[], list[int]]]]:
        """The timed cases over the first ``k`` passages: {case: {side: run}}."""
        import torch

        from ragdesk.core.engine.rag_sequence import rag_sequence_generate
        from ragdesk.core.engine.rag_token import rag_token_generate
        from ragdesk.core.types import Hit

        tok, gen, rt = self.tok, self.gen, self.rt
        passages, scores = self.passages[:k], self.scores[:k]
        hits = [Hit(i, t, x, sc) for i, ((t, x), sc) in
                enumerate(zip(passages, scores, strict=True))]
        ids300, mask300 = context_inputs(tok, rt.config, QUESTION, passages)
        ids_eq, mask_eq = ids300[:, :self.target], mask300[:, :self.target]
        assert bool(mask_eq.all())
        doc_scores = torch.tensor([scores], dtype=torch.float32)
        gen_kw = {"min_new_tokens": NEW_TOKENS, "forced_eos_token_id": tok.eos_token_id}
        strip = self.strip
        return {
            "token_greedy": {
                "reference": lambda: strip(rt.generate(
                    context_input_ids=ids300, context_attention_mask=mask300,
                    doc_scores=doc_scores, n_docs=k, num_beams=1,
                    max_length=NEW_TOKENS + 1, **gen_kw)[0]),
                "ragdesk": lambda: rag_token_generate(
                    gen, QUESTION, hits, num_beams=1, max_new_tokens=NEW_TOKENS,
                    min_new_tokens=NEW_TOKENS).token_ids,
            },
            "token_beam4": {
                "reference": lambda: strip(rt.generate(
                    context_input_ids=ids300, context_attention_mask=mask300,
                    doc_scores=doc_scores, n_docs=k, num_beams=4,
                    max_length=NEW_TOKENS + 1, **gen_kw)[0]),
                "ragdesk": lambda: rag_token_generate(
                    gen, QUESTION, hits, num_beams=4, max_new_tokens=NEW_TOKENS,
                    min_new_tokens=NEW_TOKENS).token_ids,
            },
            "sequence_beam4": {
                "reference": lambda: strip(self._rs_generate(
                    k, context_input_ids=ids_eq, context_attention_mask=mask_eq,
                    doc_scores=doc_scores, n_docs=k, num_beams=4,
                    max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS)[0]),
                "ragdesk": lambda: rag_sequence_generate(
                    gen, QUESTION, hits, decoding="thorough", num_beams=4,
                    max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS).token_ids,
            },
            "sequence_beam4_padded300": {  # timed once, for information
                "reference": lambda: strip(self._rs_generate(
                    k, context_input_ids=ids300, context_attention_mask=mask300,
                    doc_scores=doc_scores, n_docs=k, num_beams=4,
                    max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS)[0]),
            },
            "floor": {
                "encode": lambda: self._encode(ids_eq, mask_eq),
                "plain_greedy": lambda: self._plain_greedy(ids_eq, mask_eq),
            },
        }

    def _rs_generate(self, k: int, **kw: Any) -> Any:
        """``RagSequenceForGeneration.generate`` over k passages: its rescoring pass reads
        ``n_docs`` from the config, not from the argument."""
        configs = {id(c): c for c in (self.rs.config, self.rs.rag.config)}.values()
        before = [c.n_docs for c in configs]
        for c in configs:
            c.n_docs = k
        try:
            return self.rs.generate(**kw)
        finally:
            for c, n in zip(configs, before, strict=True):
                c.n_docs = n

    def _encode(self, ids: Any, mask: Any) -> list[int]:
        import torch

        with torch.inference_mode():
            self.bart.get_encoder()(input_ids=ids, attention_mask=mask)
        return []

    def _plain_greedy(self, ids: Any, mask: Any) -> list[int]:
        import torch

        with torch.inference_mode():
            out = self.bart.generate(ids[:1], attention_mask=mask[:1], num_beams=1,
                                     max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS)
        return self.strip(out[0])


def build_setup(args: argparse.Namespace, n_passages: int) -> Setup:
    import torch

    from ragdesk.core.engine.generators import Seq2SeqGenerator

    t_build = time.perf_counter()
    tok = build_tokenizer(args.vocab)
    bart = build_bart(tok, args.layers, args.d_model, args.seed)
    rt, rs = build_reference(bart, args.seed)
    gen = Seq2SeqGenerator(bart, tok, "random-bart")
    print(f"built models in {time.perf_counter() - t_build:.0f}s (vocab {len(tok)})",
          file=sys.stderr, flush=True)
    plain = starter_passages()[::97][:N_DOCS]
    lengths = [len(tok(f"{t} / {x} // {QUESTION}")["input_ids"]) for t, x in plain]
    target = int(statistics.median(lengths))
    passages = equal_length_passages(tok, QUESTION, target, max(n_passages, N_DOCS))
    g = torch.Generator().manual_seed(args.seed)
    scores = (torch.randn(len(passages), generator=g) * 2 + 70).tolist()
    return Setup(tok, bart, rt, rs, gen, target, passages, scores, args.layers, args.d_model)


def run_rounds(cases: dict[str, dict[str, Callable[[], list[int]]]], names: list[str],
               rounds: int, label: str = "") -> tuple[dict[str, list[float]],
                                                      dict[str, list[bool]]]:
    """Alternate the sides of every case, ``rounds`` times; times per ``case.side`` and, for
    cases with a reference and ragdesk, whether their tokens were equal in each round."""
    times: dict[str, list[float]] = {}
    same: dict[str, list[bool]] = {}
    for r in range(rounds):
        for name in names:
            outs = {}
            for side, fn in cases[name].items():
                dt, outs[side] = timed(fn)
                times.setdefault(f"{name}.{side}", []).append(dt)
            if "ragdesk" in outs:
                same.setdefault(name, []).append(outs["reference"] == outs["ragdesk"])
            shown = ", ".join(f"{side} {times[f'{name}.{side}'][-1]:.2f}s" for side in outs)
            tail = f", same tokens {same[name][-1]}" if name in same else ""
            print(f"{label}round {r + 1} {name}: {shown}{tail}", file=sys.stderr, flush=True)
    return times, same


def warm_up(cases: dict[str, dict[str, Callable[[], list[int]]]], names: list[str]) -> None:
    """First calls allocate memory and pick kernels (the expensive RAG-Sequence reference is
    left out: it runs the same kernels as the others)."""
    for name in names:
        for side, fn in cases[name].items():
            if not (name.startswith("sequence") and side == "reference"):
                fn()


def k_sweep(setup: Setup, ks: list[int], rounds: int) -> dict[str, Any]:
    names = ["token_greedy", "sequence_beam4"]
    median: dict[str, dict[str, list[float]]] = {n: {"reference": [], "ragdesk": []}
                                                for n in names}
    same: dict[str, list[bool]] = {n: [] for n in names}
    for k in ks:
        cases = setup.cases(k)
        warm_up(cases, names)
        times, ok = run_rounds(cases, names, rounds, label=f"K={k} ")
        for n in names:
            for side in ("reference", "ragdesk"):
                median[n][side].append(statistics.median(times[f"{n}.{side}"]))
            same[n].append(all(ok[n]))
    return {"ks": ks, "rounds": rounds, "median_s": median, "same_tokens": same,
            "generator": {"layers": setup.layers, "d_model": setup.d_model,
                          "vocab": len(setup.tok)},
            "input_tokens_per_passage": setup.target, "machine": machine()}


def sweep_plots(sw: dict[str, Any]) -> list[dict[str, Any]]:
    g = sw["generator"]
    load = sw["machine"].get("load_average_1min")
    model = f"{g['layers']}+{g['layers']} layers, d {g['d_model']}; load {load}"
    out = []
    for name, title, file in (
            ("token_greedy", "RAG-Token greedy", "engine-k-token.png"),
            ("sequence_beam4", "RAG-Sequence, 4 beams", "engine-k-sequence.png")):
        m = sw["median_s"][name]
        out.append({
            "file": file, "kind": "line",
            "title": f"{title} vs K ({model})",
            "x_label": "K (passages)",
            "y_label": f"seconds per {NEW_TOKENS}-token answer (median)",
            "series": {"transformers": {"x": sw["ks"], "y": m["reference"]},
                       "ragdesk": {"x": sw["ks"], "y": m["ragdesk"]}},
        })
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d-model", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=16_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="skip the padded RAG-Sequence run")
    ap.add_argument("--no-write", action="store_true", help="print only")
    ap.add_argument("--only", nargs="*", choices=["token_greedy", "token_beam4",
                                                  "sequence_beam4"],
                    help="time only these cases (the report needs all three)")
    ap.add_argument("--k-sweep", nargs="+", type=int, metavar="K",
                    help="also time RAG-Token greedy and RAG-Sequence 4 beams for these K")
    ap.add_argument("--sweep-rounds", type=int, default=1)
    ap.add_argument("--sweep-only", action="store_true",
                    help="only the K sweep, added to the results already written")
    args = ap.parse_args(argv)
    if args.sweep_only and not args.k_sweep:
        ap.error("--sweep-only needs --k-sweep")

    import torch

    torch.set_num_threads(args.threads)
    setup = build_setup(args, max(args.k_sweep or [N_DOCS]))

    main_res = None if args.sweep_only else compare(setup, args)
    if main_res is None and not args.sweep_only:  # a partial run: no report
        return 0
    sweep = k_sweep(setup, args.k_sweep, args.sweep_rounds) if args.k_sweep else None
    # The two parts may come from separate runs (even running at the same time): each
    # keeps what the results file holds of the other part.
    path = RESULTS_DIR / "engine.json"
    old = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    res = main_res if main_res is not None else old
    if sweep is not None:
        res["k_sweep"] = sweep
    elif "k_sweep" in old:
        res["k_sweep"] = old["k_sweep"]
    if "k_sweep" in res:
        res["plots"] = sweep_plots(res["k_sweep"])
    if "median_s" in res:
        md = render(res)
    else:  # the K = 5 comparison has not been written yet
        md = "\n".join(["# RAG decoding speed", "", *render_sweep(res["k_sweep"])])
    if not args.no_write:
        write_results("engine", res, md)
    print(md)
    return 0


def compare(setup: Setup, args: argparse.Namespace) -> dict[str, Any] | None:
    """The K = 5 comparison against the targets (None for a partial ``--only`` run)."""
    names = [n for n in ("token_greedy", "token_beam4", "sequence_beam4")
             if not args.only or n in args.only]
    cases = setup.cases(N_DOCS)
    start = machine()
    warm_up(cases, [*names, "floor"])
    times, same = run_rounds(cases, [*names, "floor"], args.rounds)
    if not args.quick:
        more, _ = run_rounds(cases, ["sequence_beam4_padded300"], 1)
        times.update(more)

    med = {k: statistics.median(v) for k, v in times.items()}
    if args.only:
        for k, v in sorted(med.items()):
            print(f"{k}: median {v:.2f}s")
        return None
    floor = med["floor.encode"] + med["floor.plain_greedy"]
    ratios = {
        "token_greedy_vs_reference": med["token_greedy.ragdesk"] / med["token_greedy.reference"],
        "token_beam4_vs_reference": med["token_beam4.ragdesk"] / med["token_beam4.reference"],
        "sequence_beam4_vs_reference":
            med["sequence_beam4.ragdesk"] / med["sequence_beam4.reference"],
        "token_greedy_vs_floor": med["token_greedy.ragdesk"] / floor,
    }
    end = machine()
    res: dict[str, Any] = {
        "generator": {"layers": args.layers, "d_model": args.d_model, "vocab": len(setup.tok),
                      "init_std": 0.1},
        "n_docs": N_DOCS,
        "new_tokens": NEW_TOKENS,
        "input_tokens_per_passage": setup.target,
        "rounds": args.rounds,
        "threads": args.threads,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "times_s": times,
        "median_s": med,
        "floor_s": floor,
        "ratios": ratios,
        "targets": TARGETS,
        "same_tokens": same,
        "all_same_tokens": all(all(v) for v in same.values()),
        "machine": start,
        "load_average_1min_at_end": end.get("load_average_1min"),
    }
    res["meets_targets"] = bool(res["all_same_tokens"] and all(
        ratios[k] <= v for k, v in TARGETS.items()))
    return res


def render(r: dict[str, Any]) -> str:
    m = r["median_s"]
    ratios = r["ratios"]
    same = r["same_tokens"]

    def row(label: str, key: str, ratio: str, target: str) -> list[str]:
        tok = "yes" if all(same[key]) else "NO"
        return [label, f"{m[key + '.reference']:.2f}", f"{m[key + '.ragdesk']:.2f}",
                f"{ratios[ratio]:.2f}x", target, tok]

    rows = [
        row("RAG-Token greedy", "token_greedy", "token_greedy_vs_reference", "<= 0.67x"),
        row("RAG-Token 4 beams", "token_beam4", "token_beam4_vs_reference", "-"),
        row("RAG-Sequence thorough, 4 beams", "sequence_beam4", "sequence_beam4_vs_reference",
            "<= 0.25x"),
    ]
    g = r["generator"]
    lines = [
        "# RAG decoding speed",
        "",
        f"Random BART generator ({g['layers']} + {g['layers']} layers, d_model "
        f"{g['d_model']}, vocabulary {g['vocab']:,} byte-level BPE trained on Vital Articles "
        f"text), K = {r['n_docs']} passages of 100 words trimmed to "
        f"{r['input_tokens_per_passage']} input tokens each, exactly {r['new_tokens']} new "
        f"tokens, {r['threads']} threads; medians of {r['rounds']} alternating rounds "
        "(reference, then ragdesk, in the same process).",
        "",
        md_table(["decoding", "transformers (s)", "ragdesk (s)", "ratio", "target",
                  "same tokens"], rows),
        "",
        f"Physical floor for RAG-Token greedy: encoding the {r['n_docs']} passages once "
        f"({m['floor.encode']:.2f} s) + plain BART greedy over one passage "
        f"({m['floor.plain_greedy']:.2f} s) = {r['floor_s']:.2f} s; ragdesk RAG-Token greedy "
        f"takes **{ratios['token_greedy_vs_floor']:.2f}x** that (target <= 1.3x).",
        "",
        "The RAG-Token references get `context_input_ids` padded to 300 tokens, as "
        "`RagRetriever` produces them. `RagSequenceForGeneration.generate` searches its "
        "candidates without an attention mask, so padding would be read as text; for equal "
        "tokens both sides get the passages unpadded (all the same length), which makes the "
        "reference faster than it is with padding.",
    ]
    if "sequence_beam4_padded300.reference" in m:
        lines.append(
            f"With the padded inputs the reference takes "
            f"{m['sequence_beam4_padded300.reference']:.1f} s (one run).")
    verdict = "All targets met." if r["meets_targets"] else "NOT all targets met."
    load = ""
    if r.get("load_average_1min_at_end") is not None:
        load = (f" The machine was shared with other jobs: load average "
                f"{r['machine'].get('load_average_1min')} at the start and "
                f"{r['load_average_1min_at_end']} at the end of the timed rounds, on "
                f"{r['machine'].get('cores')} cores.")
    if r.get("omp_wait_policy"):
        load += (f" `OMP_WAIT_POLICY={r['omp_wait_policy']}` (both sides): on a loaded "
                 "machine spinning OpenMP threads slow every 2-thread operation down "
                 "several times.")
    lines += ["", verdict + load, "", machine_line(r["machine"])]
    if "k_sweep" in r:
        lines += ["", *render_sweep(r["k_sweep"])]
    return "\n".join(lines)


def render_sweep(sw: dict[str, Any]) -> list[str]:
    g = sw["generator"]
    m = sw["median_s"]
    rows = []
    for i, k in enumerate(sw["ks"]):
        row = [str(k)]
        for name in ("token_greedy", "sequence_beam4"):
            ref, ours = m[name]["reference"][i], m[name]["ragdesk"][i]
            same = "" if sw["same_tokens"][name][i] else " (tokens differ)"
            row += [f"{ref:.2f}", f"{ours:.2f}", f"{ours / ref:.2f}x{same}"]
        rows.append(row)
    load = sw["machine"].get("load_average_1min")
    return [
        "## Decoding time against the number of passages K",
        "",
        f"Random BART ({g['layers']} + {g['layers']} layers, d_model "
        f"{g['d_model']}, vocabulary {g['vocab']:,}), passages of "
        f"{sw['input_tokens_per_passage']} input tokens, {NEW_TOKENS} new tokens, median of "
        f"{sw['rounds']} alternating round(s) per K; load average {load} at its start. "
        "transformers as above (RAG-Token padded to 300, RAG-Sequence unpadded).",
        "",
        md_table(["K", "RAG-Token greedy: transformers (s)", "ragdesk (s)", "ratio",
                  "RAG-Sequence 4 beams: transformers (s)", "ragdesk (s)", "ratio"], rows),
    ]


if __name__ == "__main__":
    raise SystemExit(main())
