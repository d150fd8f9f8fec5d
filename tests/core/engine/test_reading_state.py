"""The answer read again after its passage (ragdesk/core/engine/reading_state.py) against
transformers: the reader's state for the confidence model's probe (the hidden state after the
middle layer of an uncached forward over the prompt and the answer, averaged over the answer's
tokens) and the answer's log-probability under that forward."""

from __future__ import annotations

from typing import Any

import pytest

from ragdesk.core.engine.generators import CausalLMGenerator, PassageText, normalize_question
from ragdesk.core.engine.reading_state import AnswerReading, middle_layer, read_again

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


def _forward(gen: CausalLMGenerator, prompt: list[int], layer: int) -> tuple[Any, float]:
    """transformers' state after ``layer`` averaged over the answer, and the answer's
    log-probability, from one forward over the prompt and the answer."""
    import torch

    answer = gen.tokenizer(ANSWER, add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        out = gen.model(torch.tensor([prompt + answer]), output_hidden_states=True)
    # hidden_states[0] is the embeddings: the state after layer i is entry i + 1
    state = out.hidden_states[layer + 1][0, -len(answer):].mean(dim=0)
    lp = torch.log_softmax(out.logits[0, len(prompt) - 1:-1].float(), dim=-1)
    return state, float(lp.gather(-1, torch.tensor(answer)[:, None]).sum())


def _state(reading: AnswerReading | None) -> Any:
    assert reading is not None
    return reading.state


@pytest.mark.parametrize("source", [0, 2])
def test_the_quoted_rows_state_equals_transformers_middle_layer(lean: CausalLMGenerator,
                                                                tiny_models: Any,
                                                                source: int) -> None:
    import torch

    passages = _passages(tiny_models)
    n_layers = lean.model.config.num_hidden_layers
    assert n_layers >= 2  # a middle layer that is not the last
    reading = read_again(lean, QUESTION, passages, source, ANSWER, "token", "short")
    state = _state(reading)
    assert state.layer == middle_layer(n_layers) < n_layers - 1
    prompt = lean.input_ids(normalize_question(QUESTION, passages), passages[source], "short")
    ref, logprob = _forward(lean, prompt, state.layer)
    assert torch.allclose(torch.tensor(state.values), ref, atol=1e-4)
    assert reading is not None and reading.logprob == pytest.approx(logprob, abs=1e-4)
    # another layer is another state: the layer asked for is the one read
    other = _state(read_again(lean, QUESTION, passages, source, ANSWER, "token", "short",
                              layer=0))
    assert other.layer == 0
    assert torch.allclose(torch.tensor(other.values), _forward(lean, prompt, 0)[0], atol=1e-4)
    assert not torch.allclose(torch.tensor(other.values), ref, atol=1e-2)


def test_read_together_reads_the_prompt_of_every_passage(lean: CausalLMGenerator,
                                                         tiny_models: Any) -> None:
    import torch

    passages = _passages(tiny_models)
    reading = read_again(lean, QUESTION, passages, None, ANSWER, "together", None)
    state = _state(reading)
    prompt = lean.together_ids(normalize_question(QUESTION, passages), passages, "short")
    ref, logprob = _forward(lean, prompt, state.layer)
    assert torch.allclose(torch.tensor(state.values), ref, atol=1e-4)
    assert reading is not None and reading.logprob == pytest.approx(logprob, abs=1e-4)


def test_nothing_to_read_gives_no_state(lean: CausalLMGenerator, tiny_models: Any,
                                        causal_gen: Any) -> None:
    passages = _passages(tiny_models)
    assert read_again(lean, QUESTION, passages, 1, "  ", "token", None) is None
    assert read_again(lean, QUESTION, passages, None, ANSWER, "token", None) is None
    assert read_again(lean, QUESTION, passages, 9, ANSWER, "token", None) is None
    assert read_again(lean, QUESTION, passages, 1, ANSWER, "token", None, layer=99) is None
    assert causal_gen.lean_decoder is None  # GPT-2 runs through transformers' forward
    assert read_again(causal_gen, QUESTION, passages, 1, ANSWER, "token", None) is None
