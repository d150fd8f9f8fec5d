"""Prompts for decoder-only generators: one passage, the question, and the answer style.

Small LMs follow examples far better than instructions: the starter pack's Gemma 3 270M is a
base model (its GGUF has no chat template) and, told to "answer with a few words", still writes
sentences. So each style comes with a few worked examples — made up for ragdesk, not taken
from any evaluation set — written before the passage. They are the same for all K prompts of a
question, so the K prompts share their first few hundred tokens, which the lean decoder
computes once.

A model with a chat template gets the same examples as earlier conversation turns.

Read together (all K passages in one prompt, as chat apps do): the same worked examples, each
with its one passage, then the K passages one after the other and the question. The examples
stay the opening of every question's prompt, which the lean decoder keeps between questions.

From memory (no passage at all): the same worked questions and answers without their passages,
then the question; what the reader learned in training is all it has to go on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragdesk.core.options import check_style


@dataclass(frozen=True)
class Example:
    title: str
    text: str
    question: str
    short: str  # the answer in the "short" style
    sentence: str  # the answer in the "sentence" style


EXAMPLES = (
    Example("Eiffel Tower",
            "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It is named "
            "after the engineer Gustave Eiffel, whose company built it from 1887 to 1889.",
            "Who is the Eiffel Tower named after?", "Gustave Eiffel",
            "The Eiffel Tower is named after the engineer Gustave Eiffel."),
    Example("Photosynthesis",
            "Photosynthesis is the process by which plants use light to turn carbon dioxide "
            "and water into sugars. In plants it takes place in the chloroplasts of the leaves.",
            "Where does photosynthesis take place in plants?", "in the chloroplasts",
            "In plants, photosynthesis takes place in the chloroplasts of the leaves."),
    Example("Nile",
            "The Nile is a major north-flowing river in northeastern Africa. About 6,650 km "
            "long, it flows into the Mediterranean Sea.",
            "How long is the Nile?", "about 6,650 km",
            "The Nile is about 6,650 km long."),
    Example("Apollo 11",
            "Apollo 11 was the first crewed mission to land on the Moon. Neil Armstrong and "
            "Buzz Aldrin landed on 20 July 1969.",
            "When did Apollo 11 land on the Moon?", "20 July 1969",
            "Apollo 11 landed on the Moon on 20 July 1969."),
)

TOGETHER_INSTRUCTIONS = {
    "short": "Answer each question with a few words copied from the passages before it.",
    "sentence": "Answer each question in one sentence, using the passages before it.",
}

STYLE_INSTRUCTIONS = {
    "short": "Answer each question with a few words copied from the passage before it.",
    "sentence": "Answer each question in one sentence, using the passage before it.",
}


MEMORY_INSTRUCTIONS = {
    "short": "Answer each question with a few words.",
    "sentence": "Answer each question in one sentence.",
}


def _answer(example: Example, style: str) -> str:
    return example.short if style == "short" else example.sentence


def _block(title: str, text: str, question: str) -> str:
    body = f"{title}\n{text}".strip()
    return f"{body}\n\nQuestion: {question}"


def _plain(inst: str, blocks: Sequence[str], last: str, style: str) -> str:
    """Instruction, each worked example's block with its answer, then ``last`` and
    ``Answer:``; the answer ends at the newline."""
    parts = [inst]
    for ex, block in zip(EXAMPLES, blocks, strict=True):
        parts.append(f"{block}\nAnswer: {_answer(ex, style)}")
    parts.append(f"{last}\nAnswer:")
    return "\n\n".join(parts)


def _chat(inst: str, blocks: Sequence[str], last: str, style: str) -> list[dict[str, str]]:
    """The worked examples as earlier chat turns, then ``last`` as the user's turn."""
    msgs: list[dict[str, str]] = []
    for ex, block in zip(EXAMPLES, blocks, strict=True):
        msgs.append({"role": "user", "content": f"{inst}\n\n{block}"})
        msgs.append({"role": "assistant", "content": _answer(ex, style)})
    msgs.append({"role": "user", "content": f"{inst}\n\n{last}"})
    return msgs


def _with_passages() -> list[str]:
    return [_block(ex.title, ex.text, ex.question) for ex in EXAMPLES]


def plain_prompt(question: str, title: str, text: str, style: str) -> str:
    """A base LM's prompt: instruction, worked examples, then the passage and the question;
    the answer follows ``Answer:`` and ends at the newline."""
    check_style(style)
    return _plain(STYLE_INSTRUCTIONS[style], _with_passages(), _block(title, text, question),
                  style)


def chat_messages(question: str, title: str, text: str, style: str) -> list[dict[str, str]]:
    """A chat model's conversation: the examples as earlier turns, then the question."""
    check_style(style)
    return _chat(STYLE_INSTRUCTIONS[style], _with_passages(), _block(title, text, question),
                 style)


def _passages_block(passages: Sequence[tuple[str, str]], question: str) -> str:
    bodies = [f"{title}\n{text}".strip() for title, text in passages]
    return "\n\n".join(bodies) + f"\n\nQuestion: {question}"


def together_plain_prompt(question: str, passages: Sequence[tuple[str, str]],
                          style: str) -> str:
    """A base LM's prompt with all the passages before the question."""
    check_style(style)
    return _plain(TOGETHER_INSTRUCTIONS[style], _with_passages(),
                  _passages_block(passages, question), style)


def together_chat_messages(question: str, passages: Sequence[tuple[str, str]],
                           style: str) -> list[dict[str, str]]:
    """A chat model's conversation: the examples as earlier turns, then every passage and
    the question in the last one."""
    check_style(style)
    return _chat(TOGETHER_INSTRUCTIONS[style], _with_passages(),
                 _passages_block(passages, question), style)


def memory_plain_prompt(question: str, style: str) -> str:
    """A base LM's prompt with no passage: the worked questions, then the question."""
    check_style(style)
    return _plain(MEMORY_INSTRUCTIONS[style], [f"Question: {ex.question}" for ex in EXAMPLES],
                  f"Question: {question}", style)


def memory_chat_messages(question: str, style: str) -> list[dict[str, str]]:
    """A chat model's conversation with no passage: the worked questions as earlier turns."""
    check_style(style)
    return _chat(MEMORY_INSTRUCTIONS[style], [f"Question: {ex.question}" for ex in EXAMPLES],
                 f"Question: {question}", style)
