"""The lean Qwen2 decoder (ragdesk/core/engine/qwen2_decoder.py) against transformers'
``Qwen2ForCausalLM`` on a tiny random config with the reader's layout in small: grouped-query
attention (4 query heads on 2 key heads), q/k/v biases, SwiGLU, an untied output layer, random
norm scales and biases (so that a wrong norm or a dropped bias would show)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ragdesk.core.engine.generators import CausalLMGenerator, PassageText
from ragdesk.core.engine.qwen2_decoder import Qwen2Decoder, supports
from ragdesk.core.engine.rag_sequence import rag_sequence_generate
from ragdesk.core.engine.rag_token import rag_token_generate
from ragdesk.core.types import Answer, Hit

TOL = 1e-4
QUESTION = "who wrote the first book"


def build_tiny_qwen2(tiny_models: Any) -> tuple[Any, Any]:
    """(model, tokenizer): a random ``Qwen2ForCausalLM`` on the tiny BPE."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    if tiny_models.gemma3 is None:
        pytest.skip("no tiny tokenizer")
    tok = AutoTokenizer.from_pretrained(str(tiny_models.gemma3))
    cfg = Qwen2Config(
        vocab_size=len(tok), hidden_size=64, intermediate_size=96, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0}, rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id, initializer_range=0.2)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(1.0, 0.3)
            elif name.endswith("bias"):
                p.normal_(0.0, 0.3)
    assert model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr()
    return model, tok


@pytest.fixture(scope="module")
def qwen_parts(tiny_models: Any) -> tuple[Any, Any]:
    return build_tiny_qwen2(tiny_models)


def _generator(model: Any, tok: Any, **kw: Any) -> CausalLMGenerator:
    kw.setdefault("no_repeat_ngram_size", 0)
    return CausalLMGenerator(model, tok, "tiny-qwen2", **kw)


@pytest.fixture(scope="module")
def lean(qwen_parts: Any) -> CausalLMGenerator:
    gen = _generator(*qwen_parts, precision="float32")
    assert isinstance(gen.lean_decoder, Qwen2Decoder) and gen.precision == "float32"
    return gen


def _hits(tiny_models: Any, seed: int, n: int = 4) -> list[Hit]:
    import random

    rng = random.Random(seed)
    corpus = list(tiny_models.corpus)
    rng.shuffle(corpus)
    return [Hit(i, t, " ".join(x.split()[:80 - 9 * i]), round(rng.gauss(70.0, 1.0), 3))
            for i, (t, x) in enumerate(corpus[:n])]


def _uncached(model: Any, ids: list[int]) -> Any:
    import torch

    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), use_cache=False)
    return torch.log_softmax(out.logits[0, -1].float(), dim=-1)


def test_supports_only_plain_qwen2(qwen_parts: Any, tiny_models: Any) -> None:
    from transformers import AutoModelForCausalLM

    assert supports(qwen_parts[0])
    gemma = AutoModelForCausalLM.from_pretrained(str(tiny_models.gemma3))
    assert not supports(gemma)


@pytest.mark.parametrize("seed", [0, 1])
def test_logits_equal_an_uncached_transformers_forward(lean: Any, tiny_models: Any,
                                                       seed: int) -> None:
    import torch

    model = lean.model
    hits = _hits(tiny_models, seed)
    ctx = lean.prepare(QUESTION, [PassageText(h.title, h.text) for h in hits])
    k = len(hits)
    assert ctx.shared_prefix > 0  # the prompts' common opening ran once
    lp = torch.log_softmax(ctx.first_logits, -1)
    for z in range(k):
        assert torch.allclose(lp[z], _uncached(model, ctx.input_ids[z]), atol=TOL)
    rows = ctx.rows(torch.arange(k), 4)
    fed: list[list[int]] = [[] for _ in range(k)]
    for step in range(3):
        tokens = torch.tensor([20 + 7 * z + step for z in range(k)])
        out = torch.log_softmax(rows.step(tokens), -1)
        for z in range(k):
            fed[z].append(int(tokens[z]))
            ref = _uncached(model, ctx.input_ids[z] + fed[z])
            assert torch.allclose(out[z], ref, atol=TOL), (step, z)


def test_single_prompt_reuses_the_last_opening(lean: Any, tiny_models: Any) -> None:
    """One prompt per question (the passages read together): the next question's prompt
    starts from the kept keys and values of what the two share, with the same logits."""
    import torch

    dec = lean.lean_decoder
    dec.forget_opening()
    for seed in (3, 4):
        hits = _hits(tiny_models, seed)
        ids = lean.input_ids(QUESTION, PassageText(hits[0].title, hits[0].text))
        _state, hidden, _ = dec.prefill([ids])
        lp = torch.log_softmax(dec.logits(hidden), -1)[0]
        assert torch.allclose(lp, _uncached(lean.model, ids), atol=TOL)
    assert dec._openings


def test_two_kinds_of_prompt_each_reuse_their_own_opening(lean: Any, tiny_models: Any,
                                                         monkeypatch: Any) -> None:
    """An answer read together and one from memory alternate: each prompt starts from the
    kept opening it shares most with, and its logits are the uncached forward's."""
    import torch

    dec = lean.lean_decoder
    dec.forget_opening()
    reused: list[int] = []
    real = dec._reuse_opening

    def counted(*args: Any) -> int:
        reused.append(real(*args))
        return reused[-1]

    monkeypatch.setattr(dec, "_reuse_opening", counted)
    passages = [PassageText(h.title, h.text) for h in _hits(tiny_models, 3)]
    for question in (QUESTION, "who painted the first picture"):
        for ctx in (lean.prepare_together(question, passages),
                    lean.prepare_memory(question, passages)):
            ref = _uncached(lean.model, ctx.input_ids[0])
            assert torch.allclose(torch.log_softmax(ctx.first_logits[0], -1), ref, atol=TOL)
    # the second question's prompts each find their own kind's worked examples
    assert reused[0] == 0 and reused[2] > reused[1] and reused[3] > reused[1]


def test_rag_token_and_sequence_equal_transformers_path(qwen_parts: Any, lean: Any,
                                                        tiny_models: Any) -> None:
    via = _generator(*qwen_parts, lean_decoder=False)
    assert via.lean_decoder is None
    hits = _hits(tiny_models, 5)
    runs: tuple[tuple[Callable[..., Answer], dict[str, Any]], ...] = (
        (rag_token_generate, {}), (rag_sequence_generate, {"decoding": "thorough"}))
    for fn, kw in runs:
        a = fn(lean, QUESTION, hits, max_new_tokens=6, **kw)
        b = fn(via, QUESTION, hits, max_new_tokens=6, **kw)
        assert a.token_ids == b.token_ids
        assert abs(a.logprob - b.logprob) < 1e-3
        for ta, tb in zip(a.tokens, b.tokens, strict=True):
            assert max(abs(x - y) for x, y in zip(ta.posterior, tb.posterior,
                                                  strict=True)) < 1e-3


def test_bfloat16_agrees_with_float32(qwen_parts: Any, tiny_models: Any) -> None:
    import torch

    fast = _generator(*qwen_parts, precision="bfloat16")
    assert isinstance(fast.lean_decoder, Qwen2Decoder) and fast.precision == "bfloat16"
    exact = _generator(*qwen_parts, precision="float32")
    hits = _hits(tiny_models, 6)
    passages = [PassageText(h.title, h.text) for h in hits]
    a = torch.softmax(fast.prepare(QUESTION, passages).first_logits, -1)
    b = torch.softmax(exact.prepare(QUESTION, passages).first_logits, -1)
    assert float((a - b).abs().sum(-1).max()) < 0.1  # total variation, bf16 rounding


def test_the_output_layer_reads_int8_rows_with_bfloat16_inputs(qwen_parts: Any) -> None:
    """In bfloat16 the Qwen2 decoder's output layer reads its int8 copy for a few rows, with
    the inputs left in bfloat16 (the Gemma decoder quantizes them too, where the CPU can)."""
    from ragdesk.core.engine.causal_decoder import LM_HEAD_INT8_ROWS
    from ragdesk.core.engine.int8_kernels import Int8Head, Int8Rows, int8_rows_available

    if not int8_rows_available():
        pytest.skip("no int8-rows kernel in this torch build")
    dec = _generator(*qwen_parts, precision="bfloat16").lean_decoder
    assert isinstance(dec, Qwen2Decoder)
    assert isinstance(dec.lm_head.rows, Int8Rows) and not isinstance(dec.lm_head.rows, Int8Head)
    assert dec.lm_head.rows_up_to == LM_HEAD_INT8_ROWS
