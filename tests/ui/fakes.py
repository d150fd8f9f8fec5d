"""Hand-made Answers for widget tests that need no models (built from ragdesk.core.types)."""

from __future__ import annotations

import math
import random

from ragdesk.core.types import Answer, AnswerToken, RetrievedDoc
from ragdesk.ui.infos import SnapshotInfo

DOCS = [
    ("Charles Darwin", "Charles Robert Darwin was an English naturalist, geologist and "
     "biologist, widely known for his contributions to evolutionary biology. His proposition "
     "that all species of life have descended from a common ancestor is now generally "
     "accepted. In 1859 he published On the Origin of Species."),
    ("On the Origin of Species", "On the Origin of Species, published on 24 November 1859, "
     "is a work of scientific literature by Charles Darwin that is considered to be the "
     "foundation of evolutionary biology."),
    ("Alfred Russel Wallace", "Alfred Russel Wallace was a British naturalist, explorer, "
     "geographer, anthropologist, biologist and illustrator. He independently conceived the "
     "theory of evolution through natural selection."),
    ("Natural selection", "Natural selection is the differential survival and reproduction "
     "of individuals due to differences in phenotype."),
    ("HMS Beagle", "HMS Beagle was a Cherokee-class 10-gun brig-sloop of the Royal Navy."),
]

# Titles too long for a chip or a heat map's row label: they must shorten, not overflow.
LONG_TITLES = ["List of Byzantine emperors and the dynasties that ruled Constantinople",
               "Roman Empire", "Fall of the Western Roman Empire in the fifth century",
               "Edward Gibbon", "The History of the Decline and Fall of the Roman Empire"]


def make_answer(question: str = "who wrote the origin of species?", k: int = 5,
                n_tokens: int = 9, seed: int = 0, mode: str = "token",
                snapshot: str = "demo") -> Answer:
    rng = random.Random(seed)
    words = [" Charles", " Darwin", " wrote", " it", " in", " 1859", " after", " the",
             " Beagle", " voyage", " with", " Wallace"]
    logits = [rng.gauss(0, 1) for _ in range(k)]
    z = sum(math.exp(v) for v in logits)
    prior = [math.exp(v) / z for v in logits]
    docs = [RetrievedDoc(id=100 + i, title=DOCS[i % len(DOCS)][0], text=DOCS[i % len(DOCS)][1],
                         score=80.0 - 3 * i, prob=prior[i], snapshot=snapshot)
            for i in range(k)]
    tokens = []
    for i in range(n_tokens):
        raw = [rng.random() ** 3 for _ in range(k)]
        raw[i % k] += 1.5  # every passage is the main source of some token
        s = sum(raw)
        tokens.append(AnswerToken(id=1000 + i, text=words[i % len(words)],
                                  posterior=[v / s for v in raw]))
    text = "".join(t.text for t in tokens).strip()
    return Answer(question=question, text=text, token_ids=[t.id for t in tokens],
                  tokens=tokens, docs=docs, logprob=-4.25, mode=mode, decoding="fast",
                  snapshot=snapshot, timings={"total_s": 0.42})


def snap(name: str, *, active: bool = False, reason: str | None = None,
         state: str = "ready") -> SnapshotInfo:
    """A snapshot as the catalog lists it, for the menus and the state."""
    return SnapshotInfo(name=name, state=state, passages=10, encoder="e", family="dpr", dim=8,
                        created="2026-01-01T00:00", active=active, unusable_reason=reason)
