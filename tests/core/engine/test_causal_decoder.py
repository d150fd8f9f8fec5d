"""The lean Gemma 3 decoder (ragdesk/core/engine/causal_decoder.py) against transformers.

A tiny random ``Gemma3ForCausalLM`` with the starter's layout in small (sliding and full
attention layers with a 16-token window that the ~150-token prompts cross, grouped-query
attention, q/k norms) is run three ways: the lean decoder, ragdesk's transformers-forward path
(``CausalContext``: left padding, transformers' cache) and the naive loop of naive.py
(every passage alone, uncached, the whole prefix recomputed). float32 must give the same
tokens and the same scores; int8 is tested for agreement with float32.
"""

from __future__ import annotations

import inspect
from typing import Any, cast

import pytest

from ragdesk.core.engine.generators import CausalLMGenerator, PassageText
from ragdesk.core.engine.lean_causal_context import LeanCausalContext
from ragdesk.core.engine.rag_sequence import rag_sequence_generate
from ragdesk.core.engine.rag_token import rag_token_generate
from ragdesk.core.types import Hit

from . import naive

NEW = 8
TOL = 1e-4


def _generator(model: Any, tok: Any, **kw: Any) -> CausalLMGenerator:
    # The naive loops know nothing of n-gram blocking: switch it off where it exists.
    if "no_repeat_ngram_size" in inspect.signature(CausalLMGenerator.__init__).parameters:
        kw.setdefault("no_repeat_ngram_size", 0)
    return CausalLMGenerator(model, tok, "tiny-gemma3", **kw)


@pytest.fixture(scope="module")
def lean(gemma_parts: Any) -> CausalLMGenerator:
    gen = _generator(*gemma_parts)
    assert gen.lean_decoder is not None and gen.precision == "float32"
    return gen


@pytest.fixture(scope="module")
def via_transformers(gemma_parts: Any) -> CausalLMGenerator:
    gen = _generator(*gemma_parts, lean_decoder=False)
    assert gen.lean_decoder is None
    return gen


def _hits(tiny_models: Any, seed: int, n: int = 5, words: int = 100,
          title: str | None = None) -> list[Hit]:
    import random

    rng = random.Random(seed)
    corpus = list(tiny_models.corpus)
    rng.shuffle(corpus)
    return [Hit(i, title or t, " ".join(x.split()[:words - 7 * i]),
                round(rng.gauss(70.0, 1.0), 3)) for i, (t, x) in enumerate(corpus[:n])]


QUESTION = "who wrote the first book"


def _next_lp(gen: Any, hits: list[Hit]) -> naive.NextLP:
    """naive.causal_next_lp over the prompts the generator builds for this question (taken
    from a context of the transformers path: the prompt, with its question normalization,
    is the generator's business, not the decoder's)."""
    import torch

    ref = _generator(gen.model, gen.tokenizer, lean_decoder=False)
    prompts = ref.prepare(QUESTION, [PassageText(h.title, h.text) for h in hits]).input_ids

    def next_lp(z: int, prefix: list[int]) -> torch.Tensor:
        with torch.no_grad():
            out = gen.model(input_ids=torch.tensor([prompts[z] + prefix]), use_cache=False)
        return torch.log_softmax(out.logits[0, -1].float(), dim=-1)

    return next_lp


def test_prompts_cross_the_sliding_window_and_differ_in_length(lean: Any,
                                                               tiny_models: Any) -> None:
    """What the other tests rely on to mean something: the masks for the window and for the
    gap of shorter prompts are exercised."""
    hits = _hits(tiny_models, 0)
    ctx = lean.prepare(QUESTION, [PassageText(h.title, h.text) for h in hits])
    lens = [len(x) for x in ctx.input_ids]
    assert min(lens) > 4 * lean.model.config.sliding_window
    assert len(set(lens)) == len(lens)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_logits_equal_an_uncached_transformers_forward(lean: Any, tiny_models: Any,
                                                       seed: int) -> None:
    import torch

    hits = _hits(tiny_models, seed)
    next_lp = _next_lp(lean, hits)
    ctx = lean.prepare(QUESTION, [PassageText(h.title, h.text) for h in hits])
    k = len(hits)
    lp = torch.log_softmax(ctx.first_logits, -1)
    for z in range(k):
        assert torch.allclose(lp[z], next_lp(z, []), atol=TOL)
    rows = ctx.rows(torch.arange(k), 4)
    fed: list[list[int]] = [[] for _ in range(k)]
    tokens = torch.tensor([11, 12, 13, 14, 15])
    for _ in range(3):
        for z in range(k):
            fed[z].append(int(tokens[z]))
        lp = torch.log_softmax(rows.step(tokens), -1)
        for z in range(k):
            assert torch.allclose(lp[z], next_lp(z, fed[z]), atol=TOL)
        tokens = lp.argmax(-1)


@pytest.mark.parametrize("seed", [0, 1])
def test_rag_token_greedy_equals_the_naive_loop(lean: Any, tiny_models: Any,
                                                seed: int) -> None:
    hits = _hits(tiny_models, seed)
    ans = rag_token_generate(lean, QUESTION, hits, max_new_tokens=NEW)
    stops = {lean.tokenizer.eos_token_id, *lean.stop_ids}
    ref = naive.causal_token_greedy(_next_lp(lean, hits),
                                    naive.doc_lp_of(hits), NEW, stops)
    ids, posts = naive.visible(lean, ref)
    assert len(ref.tokens) == NEW  # a full-length answer: every step is compared
    assert ans.token_ids == ids
    assert len(set(ids)) > 1
    for tok, want in zip(ans.tokens, posts, strict=True):
        assert tok.posterior == pytest.approx(want, abs=TOL)
    assert ans.logprob == pytest.approx(ref.logprob, abs=TOL)


@pytest.mark.parametrize(("mode", "decoding", "beams"), [
    ("token", "thorough", 3), ("sequence", "thorough", 3), ("sequence", "fast", 1),
    ("sequence", "thorough", 1)])
def test_same_answers_as_the_transformers_path(lean: Any, via_transformers: Any,
                                               tiny_models: Any, mode: str, decoding: str,
                                               beams: int) -> None:
    """Beam search (cache reordering) and RAG-Sequence rescoring (the lean path scores the
    hypotheses as one prefix tree, the transformers path one padded batch)."""
    hits = _hits(tiny_models, 3)

    def run(gen: Any) -> Any:
        if mode == "token":
            return rag_token_generate(gen, QUESTION, hits, num_beams=beams,
                                      max_new_tokens=NEW)
        return rag_sequence_generate(gen, QUESTION, hits, decoding=decoding,
                                     num_beams=beams, max_new_tokens=NEW)

    ours, ref = run(lean), run(via_transformers)
    assert ours.token_ids == ref.token_ids
    assert ours.logprob == pytest.approx(ref.logprob, abs=TOL)
    for a, b in zip(ours.tokens, ref.tokens, strict=True):
        assert a.posterior == pytest.approx(b.posterior, abs=TOL)


def test_shared_prefix_runs_once_and_changes_nothing(lean: Any, tiny_models: Any) -> None:
    """Passages with one title: the prompts share their first tokens (title + newline),
    which the lean path runs once; every row still sees its own whole prompt."""
    import torch

    hits = _hits(tiny_models, 4, title="Common title of every passage here")
    ctx = lean.prepare(QUESTION, [PassageText(h.title, h.text) for h in hits])
    assert ctx.shared_prefix >= 5
    next_lp = _next_lp(lean, hits)
    lp = torch.log_softmax(ctx.first_logits, -1)
    for z in range(len(hits)):
        assert torch.allclose(lp[z], next_lp(z, []), atol=TOL)
    ans = rag_token_generate(lean, QUESTION, hits, max_new_tokens=NEW)
    stops = {lean.tokenizer.eos_token_id, *lean.stop_ids}
    ref = naive.causal_token_greedy(next_lp, naive.doc_lp_of(hits), NEW, stops)
    assert ans.token_ids == naive.visible(lean, ref)[0]
    assert ans.logprob == pytest.approx(ref.logprob, abs=TOL)


def test_identical_prompts_keep_one_token_of_their_own(lean: Any) -> None:
    import torch

    from ragdesk.core.engine.lean_causal_context import LeanCausalContext

    prompt = list(range(5, 45))
    ctx = LeanCausalContext(lean, lean.lean_decoder, [prompt, prompt, prompt[:30]])
    assert ctx.shared_prefix == 29
    with torch.no_grad():
        want = lean.model(input_ids=torch.tensor([prompt])).logits[0, -1]
        short = lean.model(input_ids=torch.tensor([prompt[:30]])).logits[0, -1]
    assert torch.allclose(ctx.first_logits[0], want, atol=TOL)
    assert torch.allclose(ctx.first_logits[1], want, atol=TOL)
    assert torch.allclose(ctx.first_logits[2], short, atol=TOL)


def test_decoding_steps_copy_no_cache(lean: Any, tiny_models: Any) -> None:
    """The cache is allocated once for the planned length: steps write into it in place."""
    import torch

    hits = _hits(tiny_models, 0)
    ctx = lean.prepare(QUESTION, [PassageText(h.title, h.text) for h in hits])
    rows = ctx.rows(torch.arange(len(hits)), 6)
    before = [t.data_ptr() for t in rows.state.k]
    for _ in range(5):
        rows.step(torch.tensor([11] * len(hits)))
    assert [t.data_ptr() for t in rows.state.k] == before


def _teacher_forced(ca: Any, cb: Any, rows: int, max_variation: float) -> tuple[int, int]:
    """NEW steps of the ``rows`` rows of two contexts, both fed ``ca``'s greedy tokens (so that
    one early difference does not count as many): every step's next-token distributions
    within ``max_variation`` (total variation) of each other; (steps where their choices
    agree, steps) over the rows."""
    import torch

    la, lb = ca.first_logits, cb.first_logits
    ra, rb = ca.rows(torch.arange(rows), NEW), cb.rows(torch.arange(rows), NEW)
    agree = total = 0
    for _ in range(NEW):
        pa, pb = torch.softmax(la, -1), torch.softmax(lb, -1)
        assert float(0.5 * (pa - pb).abs().sum(-1).max()) < max_variation
        agree += int((la.argmax(-1) == lb.argmax(-1)).sum())
        total += la.shape[0]
        tokens = la.argmax(-1)
        la, lb = ra.step(tokens), rb.step(tokens)
    return agree, total


@pytest.mark.parametrize("precision", ["int8", "bfloat16"])
def test_reduced_precision_agrees_with_float32(lean: Any, gemma_parts: Any,
                                               tiny_models: Any, precision: str) -> None:
    """The fast paths' next-token distributions stay close to float32, and their choices
    agree with float32's along float32's own path (teacher-forced, so that one early
    difference does not count as many): int8 / bfloat16 weights are an approximation."""
    import torch

    from ragdesk.core.cpu import int8_weight_levels
    from ragdesk.core.engine import causal_decoder

    if precision == "int8" and not causal_decoder.int8_available():
        pytest.skip("no int8 kernels in this torch build")
    int8 = _generator(*gemma_parts, precision=precision)
    assert int8.precision == precision

    agree = total = 0
    for seed in range(6):
        hits = _hits(tiny_models, 10 + seed)
        ps = [PassageText(h.title, h.text) for h in hits]
        ca, cb = lean.prepare(QUESTION, ps), int8.prepare(QUESTION, ps)
        # bfloat16 attends in bfloat16 (its keys and values are cached so), the others not
        cached = torch.bfloat16 if precision == "bfloat16" else torch.float32
        base = cast(LeanCausalContext, cb).base
        assert {t.dtype for t in (*base.k, *base.v)} == {cached}
        same, rows = _teacher_forced(ca, cb, len(ps), max_variation=0.15)
        agree, total = agree + same, total + rows
    # int8 weights without VNNI keep within ±63 (see cpu.int8_weight_levels): half the levels
    coarse = precision == "int8" and int8_weight_levels() < 127
    assert agree / total >= (0.85 if coarse else 0.9)


def test_bfloat16_decoding_steps_read_int8_copies(gemma_parts: Any, tiny_models: Any) -> None:
    """The bfloat16 default's output layer (K rows) and layers (one row) read int8 copies,
    so the agreement test above covers them; without them the same rows run in bfloat16."""
    import torch

    from ragdesk.core.engine.causal_decoder import LM_HEAD_INT8_ROWS
    from ragdesk.core.engine.gemma_decoder import GemmaDecoder
    from ragdesk.core.engine.int8_kernels import (
        Int8Head,
        int8_head_available,
        int8_rows_available,
    )

    if not int8_rows_available():
        pytest.skip("no int8-rows kernel in this torch build")
    fast = _generator(*gemma_parts, precision="bfloat16").lean_decoder
    assert fast is not None and fast.lm_head.rows is not None
    assert fast.lm_head.rows_up_to == LM_HEAD_INT8_ROWS
    layer_linears = [lin for layer in fast.layers
                     for lin in (*layer.qkv, *layer.gate_up, layer.o, layer.down)]
    assert layer_linears and all(lin.rows is not None and lin.rows_up_to == 1
                                 for lin in layer_linears)
    if int8_head_available():  # int8 inputs as well, the large dims left out of their scale
        head = fast.lm_head.rows
        assert isinstance(head, Int8Head)
        assert torch.equal(head.dims, fast._large_dims(int(head.dims.numel())))
    plain = GemmaDecoder(fast._model, "bfloat16", int8_rows=False)
    assert plain.lm_head.rows is None
    h = torch.randn((5, 1, plain.embed.shape[1]), generator=torch.Generator().manual_seed(0))
    a, b = fast.logits(h), plain.logits(h)
    assert not torch.equal(a, b)
    assert float(0.5 * (torch.softmax(a, -1) - torch.softmax(b, -1)).abs().sum(-1).max()) < 0.05


def _on_a_4bit_grid(weight: Any) -> None:
    """Move ``weight`` (in place) to the nearest point of a 4-bit grid per group of 32 inputs,
    as a file's Q4_K blocks leave a model's weights."""
    import torch

    from ragdesk.core.engine.int4_kernels import GROUP

    with torch.no_grad():
        g = weight.reshape(weight.shape[0], -1, GROUP)
        low = g.amin(dim=2, keepdim=True)
        step = (g.amax(dim=2, keepdim=True) - low) / 15
        g.copy_(low + ((g - low) / step).round() * step)


@pytest.mark.parametrize("rows", [1, 3])
def test_weights_kept_in_4_bits_are_read_in_4_bits(gemma_parts: Any, tiny_models: Any,
                                                    rows: int) -> None:
    """The attention outputs and MLP projections put on a 4-bit grid (as a Q4_K file keeps
    them): the bfloat16 default's steps of up to 8 rows read their 4-bit copies, the other
    weights their int8 ones (one row) or themselves, and the next-token distributions equal
    those of the same decoder without the 4-bit copies (the same weights in bfloat16) up to
    bfloat16 rounding."""
    import copy

    from ragdesk.core.engine.causal_decoder import LM_HEAD_INT8_ROWS
    from ragdesk.core.engine.int4_kernels import Int4Groups, int4_groups_available

    if not int4_groups_available():
        pytest.skip("no 4-bit kernel in this torch build")
    model = copy.deepcopy(gemma_parts[0])
    for layer in model.model.layers:
        for proj in (layer.self_attn.o_proj, layer.mlp.gate_proj, layer.mlp.up_proj):
            _on_a_4bit_grid(proj.weight)
    fast = _generator(model, gemma_parts[1], precision="bfloat16")
    dec = fast.lean_decoder
    assert dec is not None
    for layer in dec.layers:
        assert isinstance(layer.o.copy_for(LM_HEAD_INT8_ROWS), Int4Groups)
        assert isinstance(layer.gate_up[0].copy_for(LM_HEAD_INT8_ROWS), Int4Groups)
        assert layer.o.rows is None and layer.qkv[0].groups is None
        assert layer.qkv[0].copy_for(1) is not None and layer.qkv[0].copy_for(2) is None
    assert dec.lm_head.groups is None and dec.lm_head.rows is not None  # random: off the grid
    plain = _generator(model, gemma_parts[1], precision="bfloat16")
    plain_dec = plain.lean_decoder
    assert plain_dec is not None
    for layer in plain_dec.layers:  # the same weights, the bfloat16 product
        layer.o.groups = layer.gate_up[0].groups = None
    agree = total = 0
    for seed in range(6):
        ps = [PassageText(h.title, h.text) for h in _hits(tiny_models, 40 + seed, n=rows)]
        same, steps = _teacher_forced(plain.prepare(QUESTION, ps), fast.prepare(QUESTION, ps),
                                      rows, max_variation=0.03)
        agree, total = agree + same, total + steps
    assert total == 6 * NEW * rows and agree / total >= 0.95


def test_unknown_precision_is_refused(gemma_parts: Any) -> None:
    from ragdesk.core.errors import BadInputError

    with pytest.raises(BadInputError, match="precision"):
        _generator(*gemma_parts, precision="int3")


def test_other_causal_lms_keep_the_transformers_path(causal_gen: Any) -> None:
    from ragdesk.core.engine.hf_causal import CausalContext

    assert causal_gen.lean_decoder is None
    ctx = causal_gen.prepare(QUESTION, [PassageText("T", "some text here")])
    assert isinstance(ctx, CausalContext)


def test_the_precision_setting_reaches_the_engine(tiny_models: Any, tmp_path: Any) -> None:
    """The GUI and the API load through the session: the setting picks the path."""
    from ragdesk.core.app import AppContext
    from ragdesk.core.engine import causal_decoder
    from ragdesk.core.session import Session

    if tiny_models.gemma3 is None or not causal_decoder.int8_available():
        pytest.skip("no Gemma 3 or no int8 kernels here")
    app = AppContext(tmp_path / "data")
    try:
        app.data.ensure()
        app.settings.set("generator_precision", "int8")
        eng = Session(app).load_engine(question_encoder=str(tiny_models.question_encoder),
                                       generator=str(tiny_models.gemma3))
        assert eng.generator.precision == "int8"  # type: ignore[attr-defined]
        eng.close()
    finally:
        app.close()


def test_the_prompts_opening_is_computed_once_across_questions(lean: Any,
                                                               tiny_models: Any) -> None:
    """Every question's prompts open with the same instructions and worked examples: the
    second question reuses their keys and values and still gets transformers' logits; a
    change of the weights (fine-tuning works in place) drops them."""
    import torch

    dec = lean.lean_decoder
    fed: list[int] = []
    real_forward = dec.forward

    def counting(tokens: Any, state: Any, *a: Any, **kw: Any) -> Any:
        fed.append(int(tokens.shape[1]))
        return real_forward(tokens, state, *a, **kw)

    dec.forward = counting
    dec.forget_opening()  # the other tests asked the same question
    try:
        first = _hits(tiny_models, 5)
        lean.prepare(QUESTION, [PassageText(h.title, h.text) for h in first])
        opening_run = fed[0]
        assert opening_run > 50  # the instructions and examples
        fed.clear()
        hits = _hits(tiny_models, 6)
        ctx = lean.prepare(QUESTION, [PassageText(h.title, h.text) for h in hits])
        assert fed == [] or fed[0] < 5, fed  # at most the opening's last tokens ran again
        next_lp = _next_lp(lean, hits)
        lp = torch.log_softmax(ctx.first_logits, -1)
        for z in range(len(hits)):
            assert torch.allclose(lp[z], next_lp(z, []), atol=TOL)
        fed.clear()
        with torch.no_grad():
            lean.model.lm_head.weight.mul_(1.0)  # an in-place change, as an optimizer's
        lean.prepare(QUESTION, [PassageText(h.title, h.text) for h in hits])
        assert fed[0] >= opening_run - 5
    finally:
        del dec.forward


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_weights_changed_in_place_are_taken_again(gemma_parts: Any, tiny_models: Any,
                                                  precision: str) -> None:
    """Fine-tuning changes the model's weights in place. The decoder's copies (the norms'
    scales in float32; every weight in bfloat16) must follow, or the engine keeps answering
    with the old model until it is reloaded."""
    import copy

    import torch

    model = copy.deepcopy(gemma_parts[0])
    gen = _generator(model, gemma_parts[1], precision=precision)
    hits = _hits(tiny_models, 7)
    ps = [PassageText(h.title, h.text) for h in hits]
    before = gen.prepare(QUESTION, ps).first_logits
    gen_g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # an optimizer step's worth of change, norms included
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen_g) * 0.05)
    after = torch.log_softmax(gen.prepare(QUESTION, ps).first_logits, -1)
    next_lp = _next_lp(gen, hits)
    tol = TOL if precision == "float32" else 0.15
    for z in range(len(hits)):
        want = next_lp(z, [])
        assert float((after[z] - want).abs().max()) < tol
        # the change is large enough that the old weights could not pass the check above
        assert float((torch.log_softmax(before[z], -1) - want).abs().max()) > 10 * tol


@pytest.mark.parametrize("path", ["lean", "transformers"])
def test_the_closed_book_reading_equals_an_uncached_forward(lean: Any, via_transformers: Any,
                                                            tiny_models: Any,
                                                            path: str) -> None:
    """The answer read after an empty passage, right after a question whose K prompts left
    their opening in the lean decoder's cache: the same log-probability as one uncached
    forward over the empty-passage prompt and the answer."""
    import torch

    from ragdesk.core.engine.closed_book import NOTHING, closed_book

    gen = lean if path == "lean" else via_transformers
    hits = _hits(tiny_models, 3)
    rag_token_generate(gen, QUESTION, hits, max_new_tokens=NEW)  # primes the opening
    text = " ".join(hits[0].text.split()[3:6])
    got = closed_book(gen, QUESTION, text)
    ref = _generator(gen.model, gen.tokenizer, lean_decoder=False)
    prompt = ref.prepare(QUESTION, [PassageText("", "")]).input_ids[0]
    ids = gen.tokenizer(text, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = gen.model(input_ids=torch.tensor([prompt + ids]), use_cache=False).logits[0]
    lp = torch.log_softmax(logits.float(), dim=-1)
    expected = sum(float(lp[len(prompt) - 1 + i, t]) for i, t in enumerate(ids))
    assert got.tokens == len(ids) > 1
    assert got.logprob == pytest.approx(expected, abs=TOL * len(ids))
    assert closed_book(gen, QUESTION, "  ") == NOTHING
