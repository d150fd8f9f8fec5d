"""The conversation as Markdown: answers with numbered citations and their sources."""

from __future__ import annotations

from collections.abc import Sequence

from ragdesk.core.types import Answer

MODE_NAMES = {"token": "RAG-Token", "sequence": "RAG-Sequence"}


def cited_ranks(answer: Answer) -> list[int]:
    """0-based ranks of the passages that are the main source of at least one token,
    in order of first use."""
    seen: list[int] = []
    for tok in answer.tokens:
        if tok.posterior and tok.source not in seen:
            seen.append(tok.source)
    return seen


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def answer_markdown(answer: Answer, *, heading_level: int = 2, excerpt_chars: int = 300) -> str:
    marks = "".join(f"[{k + 1}]" for k in cited_ranks(answer))
    lines = [f"{'#' * heading_level} {answer.question.strip()}", ""]
    text = answer.text.strip() or "*(empty answer)*"
    if answer.cancelled:
        text += " *(stopped)*"
    lines.append(f"{text} {marks}".rstrip())
    lines.append("")
    meta = [MODE_NAMES.get(answer.mode, answer.mode)]
    if answer.mode == "sequence" and answer.decoding:
        meta.append(f"{answer.decoding} decoding")
    if answer.snapshot:
        meta.append(f"snapshot `{answer.snapshot}`")
    meta.append(f"log p(y|x) = {answer.logprob:.3f}")
    lines.append(f"*{' · '.join(meta)}*")
    if answer.docs:
        lines += ["", "Sources:", ""]
        cited = set(cited_ranks(answer))
        for k, doc in enumerate(answer.docs):
            star = "" if k in cited else " (retrieved, not cited)"
            lines.append(f"{k + 1}. **{doc.title}** — p(z|x) = {doc.prob:.3f}, "
                         f"score {doc.score:.2f}{star}")
            lines.append(f"   > {_one_line(doc.text, excerpt_chars)}")
    return "\n".join(lines) + "\n"


def conversation_markdown(answers: Sequence[Answer], title: str = "ragdesk conversation") -> str:
    parts = [f"# {title}", ""]
    for a in answers:
        parts.append(answer_markdown(a))
    return "\n".join(parts)
