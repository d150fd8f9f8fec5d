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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragdesk.core.matching import AnswerMatcher, passage_string

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


def can_end(text: str, kind: AnswerKind | None = None) -> bool:
    """Whether an answer may stop after ``text``: it holds a word, does not end open and,
    for a question that asks for a time or a number, holds one."""
    words = text.lower().split()
    return bool(words) and words[-1].strip(",;:") not in OPEN_ENDINGS and \
        not text.rstrip().endswith((",", ";", ":", "(", "-")) and \
        (kind is None or kind.complete(text))


@dataclass(frozen=True)
class AnswerKind:
    """What a question asks for, when its words say so: a time ("when", "what year") or a
    number ("how many"). A grounded answer to such a question must be a span that holds a
    date or a number, after at most a few lead words ("the late 1960s", "about 6,650").

    Why: told to copy a few words, the starter pack's 270M generator answered most "when"
    questions with whatever span followed "in" in a passage ("in the United States", "in
    English") and "how many" with "over" or "about". Question classes and answer types are
    the oldest trick of open-domain QA; here they only narrow which passage spans may start
    an answer."""

    name: str
    leads: frozenset[str]
    words: frozenset[str]
    # what may follow the first key word: more of the date or number ("28 June 1914", "5.7
    # million", "the 1960s"), not the rest of the sentence ("the 2023 Birthday Honours")
    tails: frozenset[str] = frozenset()

    def tail_ok(self, text: str) -> bool:
        """Whether the words after the first key word of ``text`` (the last one maybe cut
        short) all belong to the date or number."""
        words = [_bare(w) for w in text.lower().replace(",", " ").split()]
        seen = False
        for i, w in enumerate(words):
            if not seen:
                seen = bool(w) and w not in self.leads
                continue
            if self.is_key(w) or w in self.tails or not w:
                continue
            partial = i == len(words) - 1 and not text[-1:].isspace()
            return partial and any(x.startswith(w) for x in self.tails | self.words)
        return True

    def _first_key_word(self, text: str) -> str | None:
        for w in text.lower().replace(",", " ").split():
            w = _bare(w)
            if w and w not in self.leads:
                return w
        return None

    def is_key(self, word: str) -> bool:
        return any(c.isdigit() for c in word) or word in self.words

    def anchors(self, source: str) -> list[int]:
        """Where in ``source`` (white space collapsed) an answer of this kind may start: at a
        key word, or up to three lead words before one."""
        starts: list[int] = []
        words = [(m.start(), _bare(m.group(0).replace(",", ""))) for m in _TOKEN.finditer(source)]
        for i, (_, w) in enumerate(words):
            after = words[i + 1][1] if i + 1 < len(words) else ""
            if not self.is_key(w) or (w in _WEAK and not any(c.isdigit() for c in after)) or (
                    self.name == "time" and _ORDINAL.match(w) and not after.startswith("centur")):
                continue
            j = i
            starts.append(words[i][0])
            while j > 0 and i - j < 3 and words[j - 1][1] in self.leads:
                j -= 1
                starts.append(words[j][0])
        return sorted(set(starts))

    def complete(self, text: str) -> bool:
        """Whether ``text`` holds its key word (it does not stop at "the late")."""
        got = self._first_key_word(text)
        return got is not None and self.is_key(got)


def _bare(word: str) -> str:
    return word.strip(".;:()\"'")


_TOKEN = re.compile(r"\S+")
# months that are also common words count only before a number ("May 1945", not "may be")
_WEAK = frozenset(("may", "march"))
# an ordinal is a time only as a century ("the 18th century", not "the 36th president")
_ORDINAL = re.compile(r"^\d+(st|nd|rd|th)$")


_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")
_NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
            "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
            "seventeen", "eighteen", "nineteen", "twenty", "thirty", "forty", "fifty", "sixty",
            "seventy", "eighty", "ninety", "hundred", "thousand", "million", "billion",
            "dozen", "dozens", "hundreds", "thousands", "millions", "billions", "single",
            "once", "twice", "half")
# no "the" before a time: SQuAD-style matching drops it anyway ("the 1960s" = "1960s"), and
# the starter pack's generator, given it, starts sentences with it ("The 36th vice president")
TIME = AnswerKind("time", frozenset(("early", "late", "mid", "around", "about", "circa",
                                     "c.")), frozenset(_MONTHS),
                  frozenset(("bc", "ad", "bce", "ce", "century", "centuries", "and", "to",
                             "or", "-", "–", "of", "in")))
NUMBER = AnswerKind("number", frozenset(("about", "around", "over", "more", "than", "nearly",
                                         "approximately", "almost", "roughly", "some", "at",
                                         "least", "up", "to", "the", "a", "an", "only")),
                    frozenset(_NUMBERS),
                    frozenset(("and", "or", "to", "-", "–", "percent", "%", "times", "per",
                               "cent")))
_TIME_Q = re.compile(r"^\s*(when\b|what (year|date|century|decade)\b|which (year|century)\b|"
                     r"in (what|which) (year|century)\b)|\b(what|which) year\b")
_NUMBER_Q = re.compile(r"\bhow (many|much)\b")


def answer_kind(question: str) -> AnswerKind | None:
    q = question.lower()
    if _NUMBER_Q.search(q):
        return NUMBER
    if _TIME_Q.search(q):
        return TIME
    return None


def _tidy(text: str) -> bool:
    """Whether ``text`` holds a word and no run of white space. Spans are matched with white
    space collapsed, so without this a token of spaces always matches and a model that wants
    to stop where it may not (after a comma) pads the answer with spaces instead. One space at
    the end stays allowed: Gemma writes " 1914" as a space token and then digits."""
    core = text.lstrip()
    return bool(core) and _WS_RUN.search(core) is None


_WS_RUN = re.compile(r"  |[^\S ]")  # two spaces, or white space other than a space


class SpanConstraint:
    """Masks every token that would make the answer leave the passages' text."""

    def __init__(self, tokenizer: Any, passages: Sequence[PassageText],
                 stop_ids: Collection[int], passthrough_ids: Collection[int] = (),
                 kind: AnswerKind | None = None) -> None:
        import torch

        self.kind = kind
        # a typed answer starts at an anchor (see AnswerKind.anchors)
        self.tokenizer = tokenizer
        self.sources = [normalize_span(f"{p.title}\n{p.text}") for p in passages]
        self.held_strings = [passage_string(p.title, p.text) for p in passages]
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
        self._ok_cache: dict[tuple[str, bool], bool] = {}
        self._whole_cache: dict[str, bool] = {}
        self.anchored = ([(src, at) for src in self.sources for at in kind.anchors(src)]
                         if kind is not None else [])

    def whole(self, text: str) -> bool:
        """Whether a passage holds ``text`` as whole words, by the has-answer test that
        evaluation and the shown sources use: "July 19" is a substring of "28 July 1914" but
        no answer a passage gives, while "1933" of "a 1933–1938 series" is one."""
        key = normalize_span(text)
        hit = self._whole_cache.get(key)
        if hit is None:
            matcher = AnswerMatcher([text])
            hit = any(matcher.matches(s) for s in self.held_strings)
            self._whole_cache[key] = hit
        return hit

    def may_end(self, text: str) -> bool:
        """Whether the answer may stop after ``text``: see :func:`can_end`, and a whole span."""
        return can_end(text, self.kind) and self.whole(text)

    def allowed(self, text: str) -> bool:
        """Whether ``text`` (an answer so far) is a span of a passage that starts where a
        word starts ("ondon" of "London" is not) and, when it ends in a space, whose last
        word is whole there ("19 " is a dead end in "1914")."""
        key = normalize_span(text)
        word_ended = text[-1:].isspace()
        hit = self._ok_cache.get((key, word_ended))
        if hit is None:
            pattern = re.compile(r"(?<!\w)" + re.escape(key) + (r"(?!\w)" if word_ended else ""))
            hit = any(key in s and pattern.search(s) is not None for s in self.sources)
            self._ok_cache[(key, word_ended)] = hit
        return hit

    def _of_kind(self, text: str) -> bool:
        if self.kind is None:
            return True
        key = normalize_span(text)
        return self.kind.tail_ok(key) and any(src.startswith(key, at)
                                              for src, at in self.anchored)

    def _date_goes_on(self, text: str) -> bool:
        """Whether a time answer that holds no number yet is followed by one in a passage
        ("July" in "began on 28 July 1914"): it may not stop there, a month alone answers a
        "when" question only where no passage gives the year."""
        if self.kind is not TIME or any(c.isdigit() for c in text):
            return False
        key = normalize_span(text)
        return any(src.startswith(key, at) and
                   src[at + len(key):].lstrip(" ,")[:1].isdigit() for src, at in self.anchored)

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
            ok = torch.tensor([self.allowed(t) and _tidy(t) and self._of_kind(t) for t in texts],
                              dtype=torch.bool)
            keep = cands[ok]
            out[r, keep] = scores[r, keep]
            out[r, self.passthrough] = scores[r, self.passthrough]
            text = self.tokenizer.decode(prefix, skip_special_tokens=True)
            ended = self.may_end(text) and not self._date_goes_on(text)
            if ended or keep.numel() == 0:
                # an answer may end wherever it is a whole span; with nothing allowed the
                # only honest move is to stop
                out[r, self.stop_ids] = scores[r, self.stop_ids]
        return out


def span_processors(generator: Any, passages: Sequence[PassageText], grounded: bool,
                    question: str = "") -> list[SpanConstraint]:
    """The processors a search adds for ``grounded`` decoding (none otherwise); a question
    that asks for a time or a number (see :class:`AnswerKind`) gets a span that holds one, when
    the passages have one."""
    if not grounded:
        return []
    s = generator.settings
    passthrough = {i for i in (s.forced_bos_token_id,) if i is not None}
    kind = answer_kind(question)
    if kind is not None and not any(kind.anchors(normalize_span(f"{p.title} {p.text}"))
                                    for p in passages):
        kind = None  # no span could satisfy it: an untyped span beats none
    return [SpanConstraint(generator.tokenizer, passages, s.eos_token_ids, passthrough, kind)]


def end_at_a_whole_span(emitter: Any, constraint: Sequence[SpanConstraint]) -> None:
    """Cut a grounded answer that ran into a dead end back to where it could last end.

    The constraint checks text, so a model can take a token that starts the passage's next
    word and then find no token that finishes it ("the temperature a" of "at"): the search
    stops there. The answer keeps its longest start that may end (a whole span, not open, of
    its kind), else nothing; the tokens were streamed already, the final answer is the cut
    one."""
    if not constraint or not emitter.ids:
        return
    rule = constraint[0]
    for n in range(len(emitter.ids), 0, -1):
        text = rule.tokenizer.decode(emitter.ids[:n], skip_special_tokens=True)
        if rule.may_end(text):
            if n < len(emitter.ids):
                emitter.keep(n)
            return
    # No start of it is a whole span ("na" of "native"): no passage says it, so it is no
    # quote, and an empty answer is the honest one.
    emitter.keep(0)
