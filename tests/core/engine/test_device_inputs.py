"""Every tensor an encoder or generator receives is on the model's device.

The model runs on a fake second device (tests/core/fake_device.py): CPU data that any op
refuses to mix with CPU tensors, as CUDA would. Each path must give the same tokens (or
vectors) there as on the CPU. No GPU was used for these tests.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from ragdesk.core.types import Hit
from tests.core.fake_device import FAKE, DeviceMismatch, FakeDevice

QUESTION = "who wrote the play about the king?"
HITS = [Hit(i, f"Title {i}", f"passage {i} about a king, a play and {i} daughters", 9.0 - i)
        for i in range(3)]
CASES: list[tuple[str, str | None, int, bool]] = [
    ("token", None, 1, False), ("token", None, 2, False), ("token", None, 1, True),
    ("sequence", "thorough", 2, False), ("sequence", "fast", 1, False),
    ("sequence", "fast", 1, True)]  # the last of each: grounded (a span of the passages)


def test_the_fake_device_refuses_a_cpu_input() -> None:
    with FakeDevice():
        layer = torch.nn.Linear(4, 2).to(FAKE)
        assert layer.weight.device == FAKE
        out = layer(torch.ones(1, 4).to(FAKE))
        assert out.device == FAKE
        with pytest.raises(DeviceMismatch):
            layer(torch.ones(1, 4))
        back = out.cpu()
    assert back.device.type == "cpu" and back.shape == (1, 2)


def _answer(gen: Any, mode: str, decoding: str | None, beams: int,
            grounded: bool) -> list[int]:
    from ragdesk.core.engine.rag_sequence import rag_sequence_generate
    from ragdesk.core.engine.rag_token import rag_token_generate

    if mode == "token":
        ans = rag_token_generate(gen, QUESTION, HITS, num_beams=beams, max_new_tokens=5,
                                 grounded=grounded)
    else:
        ans = rag_sequence_generate(gen, QUESTION, HITS, decoding=decoding or "fast",
                                    num_beams=beams, max_new_tokens=5, grounded=grounded)
    return list(ans.token_ids)


def _bart(path: Any, device: str, lean: bool) -> Any:
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from ragdesk.core.engine.generators import Seq2SeqGenerator

    model = AutoModelForSeq2SeqLM.from_pretrained(str(path), use_safetensors=True).to(device)
    return Seq2SeqGenerator(model, AutoTokenizer.from_pretrained(str(path)), "bart",
                            lean_decoder=lean)


def _causal(path: Any, device: str, lean: bool | None = None) -> Any:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ragdesk.core.engine.generators import CausalLMGenerator

    # transformers declares PreTrainedModel.to as functools.wraps(torch.nn.Module.to), whose
    # stub does not bind self, so the device is checked against the self parameter.
    model = AutoModelForCausalLM.from_pretrained(
        str(path), use_safetensors=True).to(device)  # type: ignore[arg-type]
    return CausalLMGenerator(model, AutoTokenizer.from_pretrained(str(path)), "causal",
                             precision="float32", lean_decoder=lean)


def _same_on_both(make: Any, cases: list[tuple[str, str | None, int, bool]]) -> None:
    expected = [_answer(make("cpu"), *case) for case in cases]
    with FakeDevice():
        gen = make(FAKE.type)
        assert gen.device == FAKE
        got = [_answer(gen, *case) for case in cases]
    assert got == expected


def test_lean_bart_inputs_on_the_model_device(tiny_models: Any) -> None:
    _same_on_both(lambda d: _bart(tiny_models.bart, d, lean=True), CASES)


def test_transformers_bart_inputs_on_the_model_device(tiny_models: Any) -> None:
    _same_on_both(lambda d: _bart(tiny_models.bart, d, lean=False), CASES)


@pytest.mark.parametrize("lean", [True, False])
def test_gemma_inputs_on_the_model_device(tiny_models: Any, lean: bool) -> None:
    if tiny_models.gemma3 is None:
        pytest.skip("this transformers has no Gemma 3")
    _same_on_both(lambda d: _causal(tiny_models.gemma3, d, lean), CASES)


def test_other_causal_lm_inputs_on_the_model_device(tiny_models: Any) -> None:
    _same_on_both(lambda d: _causal(tiny_models.causal_lm, d), CASES)  # GPT-2: transformers


@pytest.mark.parametrize("which", ["ctx_encoder", "st_encoder"])
def test_encoders_follow_ragdesk_device(tiny_models: Any, which: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from ragdesk.core.encoders import load_encoder

    path = getattr(tiny_models, which)
    texts = [("A title", "a passage about a king"), ("Other", "short")]
    cpu = load_encoder(path, device="cpu")
    inputs = texts if cpu.info.family == "dpr" else [f"{a}. {b}" for a, b in texts]
    expected = cpu.encode(inputs)
    monkeypatch.setenv("RAGDESK_DEVICE", FAKE.type)
    with FakeDevice():
        enc = load_encoder(path)
        assert next(enc.model.parameters()).device == FAKE
        assert enc.fast() is enc  # the fused kernel is for CPU models only
        got = enc.encode(inputs)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
