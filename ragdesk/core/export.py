"""Answers and conversations as Markdown (for people) and JSON (for programs, and to restore).

The JSON of an answer is :meth:`Answer.to_json` plus what the conversation store keeps beside
it (model pack, options, time); :func:`answer_from_json` reads it back, so a JSON export holds
everything needed to show the answer again: tokens with their posteriors, and the passages'
text, not only their ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragdesk.core.types import Answer, AnswerToken, RetrievedDoc
from ragdesk.core.units import logprob_text, prior_text

MODE_NAMES = {"token": "RAG-Token", "sequence": "RAG-Sequence", "together": "Read together"}
JSON_FORMAT = "ragdesk-conversation"
JSON_VERSION = 1


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
    meta.append(logprob_text(answer.logprob))
    lines.append(f"*{' · '.join(meta)}*")
    if answer.docs:
        lines += ["", "Sources:", ""]
        cited = set(cited_ranks(answer))
        for k, doc in enumerate(answer.docs):
            star = "" if k in cited else " (retrieved, not cited)"
            lines.append(f"{k + 1}. **{doc.title}** — {prior_text(doc.prob)}, "
                         f"score {doc.score:.2f}{star}")
            lines.append(f"   > {_one_line(doc.text, excerpt_chars)}")
    return "\n".join(lines) + "\n"


def conversation_markdown(answers: Sequence[Answer], title: str = "ragdesk conversation") -> str:
    parts = [f"# {title}", ""]
    for a in answers:
        parts.append(answer_markdown(a))
    return "\n".join(parts)


# Any: parsed JSON, each value converted (int, float, str) where it is read; this module sits
# beside safe_json in the foundations layer, so it cannot use its narrowing helpers.
def answer_from_json(d: Mapping[str, Any]) -> Answer:
    """The inverse of :meth:`Answer.to_json` (extra keys, such as ``source``, are ignored)."""
    tokens = [AnswerToken(int(t["id"]), str(t["text"]), [float(p) for p in t["posterior"]],
                          None if t.get("quoted_from") is None else int(t["quoted_from"]))
              for t in d.get("tokens") or []]
    docs = [RetrievedDoc(int(r["id"]), str(r["title"]), str(r["text"]), float(r["score"]),
                         float(r["prob"]), r.get("snapshot"))
            for r in d.get("docs") or []]
    return Answer(
        question=str(d["question"]), text=str(d["text"]),
        token_ids=[int(i) for i in d.get("token_ids") or []], tokens=tokens, docs=docs,
        logprob=float(d["logprob"]), mode=str(d["mode"]), decoding=d.get("decoding"),
        snapshot=d.get("snapshot"),
        timings={str(k): float(v) for k, v in (d.get("timings") or {}).items()},
        cancelled=bool(d.get("cancelled", False)),
        temperature=float(d.get("temperature", 1.0)), style=d.get("style"),
        grounded=bool(d.get("grounded", False)), retriever=d.get("retriever"),
        confidence=None if d.get("confidence") is None else float(d["confidence"]),
        abstained=bool(d.get("abstained", False)),
        from_memory=bool(d.get("from_memory", False)),
        other_text=None if d.get("other_text") is None else str(d["other_text"]),
        features={str(k): float(v) for k, v in (d.get("features") or {}).items()},
    )


def conversation_json(title: str, created: str, answers: Sequence[Mapping[str, object]]
                      ) -> dict[str, object]:
    """The JSON export of a conversation; ``answers`` are :meth:`Answer.to_json` dicts with
    the store's ``pack``, ``options`` and ``created`` added."""
    return {"format": JSON_FORMAT, "version": JSON_VERSION, "title": title,
            "created": created, "answers": list(answers)}
