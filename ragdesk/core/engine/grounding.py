"""Grounded decoding: the answer is a span of the retrieved passages.

A logits processor that leaves, at every step, only the tokens that keep the answer text a
substring of some retrieved passage (title or text; case and runs of white space ignored), plus
the stop tokens once the answer holds something. Every answer token then has a literal source,
and a small generator cannot drift into text no passage supports.

Checking text rather than token ids makes the constraint independent of how the tokenizer
splits a word at the start of the answer ("Jane" there, "▁Jane" inside a passage). The
candidates are the tokens that occur in the passages' tokenizations, whole and word by word
(a few hundred), so each step decodes only those; matching a candidate is a substring test, the
same language a suffix automaton over the passages would accept.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from ragdesk.core.engine.generators import PassageText


def normalize_span(text: str) -> str:
    return " ".join(text.lower().split())


# A span does not end on these: "in the", "at a" are where a constrained model stops when the
# word it wanted is not in the passages, and no answer ends there.
OPEN_ENDINGS = frozenset((
    "a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "and", "or",
    "but", "as", "than", "that", "which", "who", "whose", "his", "her", "its", "their", "our",
    "your", "my"))


def can_end(text: str) -> bool:
    """Whether an answer may stop after ``text``: it holds a word and does not end open."""
    words = text.lower().split()
    return bool(words) and words[-1].strip(",;:") not in OPEN_ENDINGS and \
        not text.rstrip().endswith((",", ";", ":", "(", "-"))


def _tidy(text: str) -> bool:
    """Whether ``text`` holds a word and no stray white space. Spans are matched with white
    space collapsed, so without this a token of spaces always matches and a model that wants
    to stop where it may not (after a comma) pads the answer with spaces instead."""
    core = text.lstrip()
    return bool(core) and core == core.rstrip() and _WS_RUN.search(core) is None


_WS_RUN = re.compile(r"\s\s|[\n\t\r]")


class SpanConstraint:
    """Masks every token that would make the answer leave the passages' text."""

    def __init__(self, tokenizer: Any, passages: Sequence[PassageText],
                 stop_ids: Collection[int], passthrough_ids: Collection[int] = ()) -> None:
        import torch

        self.tokenizer = tokenizer
        self.sources = [normalize_span(f"{p.title}\n{p.text}") for p in passages]
        texts = [t for p in passages for t in (p.title, p.text) if t]
        words = sorted({w for t in texts for w in t.split()})
        ids: set[int] = set()
        for group in (texts, [" " + t for t in texts], words, [" " + w for w in words]):
            if group:
                for row in tokenizer(group, add_special_tokens=False)["input_ids"]:
                    ids.update(int(i) for i in row)
        special = set(int(i) for i in (tokenizer.all_special_ids or []))
        self.stop_ids = torch.tensor(sorted(int(i) for i in stop_ids), dtype=torch.long)
        self.candidates = torch.tensor(sorted(ids - special - set(stop_ids)), dtype=torch.long)
        # tokens that add no text and that the model may need (BART's forced BOS)
        self.passthrough = torch.tensor(sorted(int(i) for i in passthrough_ids),
                                        dtype=torch.long)
        self._ok_cache: dict[str, bool] = {}

    def allowed(self, text: str) -> bool:
        """Whether ``text`` (an answer so far) is a span of a passage."""
        key = normalize_span(text)
        hit = self._ok_cache.get(key)
        if hit is None:
            hit = any(key in s for s in self.sources)
            self._ok_cache[key] = hit
        return hit

    def _generated(self, row: torch.Tensor) -> list[int]:
        # column 0 is the search's start token; finished rows carry pad after their stop
        return [int(t) for t in row[1:].tolist()]

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        import torch

        out = torch.full_like(scores, float("-inf"))
        cands = self.candidates
        for r in range(scores.shape[0]):
            prefix = self._generated(input_ids[r])
            texts = self.tokenizer.batch_decode([[*prefix, int(c)] for c in cands.tolist()],
                                                skip_special_tokens=True)
            ok = torch.tensor([self.allowed(t) and _tidy(t) for t in texts], dtype=torch.bool)
            keep = cands[ok]
            out[r, keep] = scores[r, keep]
            out[r, self.passthrough] = scores[r, self.passthrough]
            ended = can_end(self.tokenizer.decode(prefix, skip_special_tokens=True))
            if ended or keep.numel() == 0:
                # an answer may end wherever it is a whole span; with nothing allowed the
                # only honest move is to stop
                out[r, self.stop_ids] = scores[r, self.stop_ids]
        return out


def span_processors(generator: Any, passages: Sequence[PassageText], grounded: bool
                    ) -> list[SpanConstraint]:
    """The processors a search adds for ``grounded`` decoding (none otherwise)."""
    if not grounded:
        return []
    s = generator.settings
    passthrough = {i for i in (s.forced_bos_token_id,) if i is not None}
    return [SpanConstraint(generator.tokenizer, passages, s.eos_token_ids, passthrough)]
