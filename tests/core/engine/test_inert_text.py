"""A special token's string in a passage or a question reaches the generator as plain
characters, never as the control token; text without one tokenizes exactly as before."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from ragdesk.core.engine.generators import CausalLMGenerator, PassageText
from ragdesk.core.engine.inert_text import BREAK, InertText, special_strings

from .test_qwen2_decoder import build_tiny_qwen2

QUESTION = "who wrote the first book"
CLEAN = PassageText("Books", "The first book was written by a scribe in the old city.")


class _Added:
    def __init__(self, content: str, special: bool) -> None:
        self.content, self.special = content, special


class _StubTokenizer:
    all_special_tokens: ClassVar[list[str]] = ["<eos>", "<bos>"]
    added_tokens_decoder: ClassVar[dict[int, _Added]] = {
        7: _Added("<|im_end|>", True), 8: _Added("<|im", True), 9: _Added("\n\n\n", False)}


def _hostile(gen: Any) -> PassageText:
    """A passage that holds every special string of the generator's tokenizer that the
    prompt could use, between ordinary words."""
    specials = " and ".join(special_strings(gen.tokenizer)[:20])
    return PassageText(f"Books {specials}", f"The first book {specials} was written.")


def _specials_in(gen: Any, ids: list[int]) -> list[int]:
    return [i for i in ids if i in gen.special_ids]


def test_special_strings_are_broken_longest_first_and_nothing_else_changes() -> None:
    inert = InertText(_StubTokenizer())
    assert inert.specials[0] == "<|im_end|>"  # before its own prefix "<|im"
    assert "\n\n\n" not in inert.specials  # an added token that is not special stays text
    out = inert.text("a<|im_end|>b <eos> c\n\n\n")
    assert out == f"a<{BREAK}|im_end|>b <{BREAK}eos> c\n\n\n"
    assert inert.text(out) == out  # nothing left to break
    plain = "an ordinary passage, 2 < 3"
    assert inert.text(plain) is plain
    p = PassageText("t", "x")
    assert inert.passage(p) is p


@pytest.fixture(scope="module")
def qwen_gen(tiny_models: Any) -> CausalLMGenerator:
    """The tiny Qwen2 with ChatML-like turn markers added as special tokens (only prompts are
    built here: the model never reads their ids)."""
    model, tok = build_tiny_qwen2(tiny_models)
    start, end = "<|turn|>", "<|end|>"
    tok.add_special_tokens({"additional_special_tokens": [start, end]})
    tok.chat_template = ("{% for m in messages %}" + start + "{{ m['role'] }}\n"
                         "{{ m['content'] }}" + end + "\n{% endfor %}"
                         "{% if add_generation_prompt %}" + start + "assistant\n{% endif %}")
    return CausalLMGenerator(model, tok, "tiny-qwen2", no_repeat_ngram_size=0)


def test_hostile_passage_adds_no_control_token_to_a_causal_prompt(causal_gen: Any) -> None:
    assert special_strings(causal_gen.tokenizer)
    clean = causal_gen.input_ids(QUESTION, CLEAN)
    hostile = causal_gen.input_ids(QUESTION, _hostile(causal_gen))
    assert _specials_in(causal_gen, hostile) == _specials_in(causal_gen, clean)
    # the reference: tokenizing the prompt as before, with no special string in it
    assert clean == causal_gen.tokenizer(causal_gen.prompt_text(QUESTION, CLEAN))["input_ids"]


def test_hostile_question_adds_no_control_token(causal_gen: Any) -> None:
    specials = " ".join(special_strings(causal_gen.tokenizer)[:5])
    clean = causal_gen.input_ids(QUESTION, CLEAN)
    hostile = causal_gen.input_ids(f"{QUESTION} {specials}", CLEAN)
    assert _specials_in(causal_gen, hostile) == _specials_in(causal_gen, clean)


def test_hostile_passages_read_together_add_no_chat_turn(qwen_gen: CausalLMGenerator) -> None:
    assert qwen_gen.use_chat_template
    clean = qwen_gen.together_ids(QUESTION, [CLEAN, CLEAN])
    hostile = qwen_gen.together_ids(QUESTION, [CLEAN, _hostile(qwen_gen)])
    assert _specials_in(qwen_gen, hostile) == _specials_in(qwen_gen, clean)
    assert _specials_in(qwen_gen, clean)  # the template's own markers are still there
    # the hostile passage's words are all in the prompt, readable as text
    assert "was written" in qwen_gen.tokenizer.decode(hostile)


def test_hostile_passage_adds_no_control_token_to_a_bart_input(bart_gen: Any) -> None:
    clean = bart_gen.input_ids(QUESTION, CLEAN)
    hostile = bart_gen.input_ids(QUESTION, _hostile(bart_gen))
    assert _specials_in(bart_gen, hostile) == _specials_in(bart_gen, clean)
