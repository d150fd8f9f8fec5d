"""The reader's state for the confidence model's probe (ragdesk/core/engine/reading_state.py)
against transformers: the hidden state after the middle layer of an uncached forward over the
prompt and the answer, averaged over the answer's tokens."""

from __future__ import annotations

from typing import Any

import pytest

from ragdesk.core.engine.generators import CausalLMGenerator, PassageText, normalize_question
from ragdesk.core.engine.reading_state import middle_layer, reading_state

ANSWER = "the first book of the library"
QUESTION = "who wrote the first book"


@pytest.fixture(scope="module")
def lean(gemma_parts: Any) -> CausalLMGenerator:
    model, tok = gemma_parts
    gen = CausalLMGenerator(model, tok, "tiny-gemma3")
    assert gen.lean_decoder is not None and gen.precision == "float32"
    return gen


def _passages(tiny_models: Any) -> list[PassageText]:
    return [PassageText(t, " ".join(x.split()[:60])) for t, x in list(tiny_models.corpus)[:4]]


def _reference(gen: CausalLMGenerator, prompt: list[int], layer: int) -> Any:
    import torch

    answer = gen.tokenizer(ANSWER, add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        out = gen.model(torch.tensor([prompt + answer]), output_hidden_states=True)
    # hidden_states[0] is the embeddings: the state after layer i is entry i + 1
    return out.hidden_states[layer + 1][0, -len(answer):].mean(dim=0)


@pytest.mark.parametrize("source", [0, 2])
def test_the_quoted_rows_state_equals_transformers_middle_layer(lean: CausalLMGenerator,
                                                                tiny_models: Any,
                                                                source: int) -> None:
    import torch

    passages = _passages(tiny_models)
    n_layers = lean.model.config.num_hidden_layers
    assert n_layers >= 2  # a middle layer that is not the last
    state = reading_state(lean, QUESTION, passages, source, ANSWER, "token", "short")
    assert state is not None and state.layer == middle_layer(n_layers) < n_layers - 1
    prompt = lean.input_ids(normalize_question(QUESTION, passages), passages[source], "short")
    ref = _reference(lean, prompt, state.layer)
    assert torch.allclose(torch.tensor(state.values), ref, atol=1e-4)
    # another layer is another state: the layer asked for is the one read
    other = reading_state(lean, QUESTION, passages, source, ANSWER, "token", "short", layer=0)
    assert other is not None and other.layer == 0
    assert torch.allclose(torch.tensor(other.values), _reference(lean, prompt, 0), atol=1e-4)
    assert not torch.allclose(torch.tensor(other.values), ref, atol=1e-2)


def test_read_together_reads_the_prompt_of_every_passage(lean: CausalLMGenerator,
                                                         tiny_models: Any) -> None:
    import torch

    passages = _passages(tiny_models)
    state = reading_state(lean, QUESTION, passages, None, ANSWER, "together", None)
    assert state is not None
    prompt = lean.together_ids(normalize_question(QUESTION, passages), passages, "short")
    assert torch.allclose(torch.tensor(state.values), _reference(lean, prompt, state.layer),
                          atol=1e-4)


def test_nothing_to_read_gives_no_state(lean: CausalLMGenerator, tiny_models: Any,
                                        causal_gen: Any) -> None:
    passages = _passages(tiny_models)
    assert reading_state(lean, QUESTION, passages, 1, "  ", "token", None) is None
    assert reading_state(lean, QUESTION, passages, None, ANSWER, "token", None) is None
    assert reading_state(lean, QUESTION, passages, 9, ANSWER, "token", None) is None
    assert reading_state(lean, QUESTION, passages, 1, ANSWER, "token", None, layer=99) is None
    assert causal_gen.lean_decoder is None  # GPT-2 runs through transformers' forward
    assert reading_state(causal_gen, QUESTION, passages, 1, ANSWER, "token", None) is None
