"""Fixtures for the engine tests: the tiny generators, transformers' RAG references and
retrieved passages with the inputs the reference gets for them."""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, cast

import pytest

from ragdesk.core.types import Hit

N_DOCS = 5


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Any:
    """Tiny models gain nothing from a second thread, and on a shared 2-core machine two
    OpenMP threads can wait on each other for seconds per call."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def bart_gen(tiny_models: Any) -> Any:
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from ragdesk.core.engine.generators import Seq2SeqGenerator

    model = AutoModelForSeq2SeqLM.from_pretrained(str(tiny_models.bart), use_safetensors=True)
    tok = AutoTokenizer.from_pretrained(str(tiny_models.bart))
    return Seq2SeqGenerator(model, tok, "tiny-bart")


@pytest.fixture(scope="session")
def causal_gen(tiny_models: Any) -> Any:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ragdesk.core.engine.generators import CausalLMGenerator

    model = AutoModelForCausalLM.from_pretrained(str(tiny_models.causal_lm),
                                                 use_safetensors=True)
    tok = AutoTokenizer.from_pretrained(str(tiny_models.causal_lm))
    return CausalLMGenerator(model, tok, "tiny-gpt2")


@pytest.fixture(scope="module")
def gemma_parts(tiny_models: Any) -> tuple[Any, Any]:
    """The tiny ``Gemma3ForCausalLM`` (the starter's architecture) and its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if tiny_models.gemma3 is None:
        pytest.skip("this transformers has no Gemma 3")
    model = AutoModelForCausalLM.from_pretrained(str(tiny_models.gemma3), use_safetensors=True)
    tok = AutoTokenizer.from_pretrained(str(tiny_models.gemma3))
    assert type(model).__name__ == "Gemma3ForCausalLM"
    return model, tok


@pytest.fixture(scope="session")
def rag_token_ref(tiny_models: Any) -> Any:
    from transformers import RagTokenForGeneration

    return RagTokenForGeneration.from_pretrained(str(tiny_models.rag_token),
                                                 use_safetensors=True).eval()


@pytest.fixture(scope="session")
def rag_sequence_ref(tiny_models: Any) -> Any:
    from transformers import RagSequenceForGeneration

    return RagSequenceForGeneration.from_pretrained(str(tiny_models.rag_sequence),
                                                    use_safetensors=True).eval()


@dataclass
class Case:
    """A question, its K retrieved passages and what ``RagRetriever`` would feed the
    reference for them."""

    question: str
    hits: list[Hit]
    context_input_ids: Any  # [K, 300], padded as RagRetriever.postprocess_docs pads
    context_attention_mask: Any
    doc_scores: Any  # [1, K] float32
    length: int  # real tokens per input when the inputs were made equal in length, else 0

    def unpadded(self) -> tuple[Any, Any]:
        """The inputs cut to their common length (only for equal-length cases)."""
        assert self.length > 0
        n = self.length
        return self.context_input_ids[:, :n], self.context_attention_mask[:, :n]


def reference_inputs(tokenizer: Any, config: Any, question: str,
                     hits: list[Hit]) -> tuple[Any, Any]:
    """transformers' own ``RagRetriever.postprocess_docs`` (run without an index)."""
    from transformers.models.rag.retrieval_rag import RagRetriever

    # postprocess_docs reads only these two attributes of the retriever it is given
    fake = cast(RagRetriever,
                types.SimpleNamespace(config=config, generator_tokenizer=tokenizer))
    docs = [{"title": [h.title for h in hits], "text": [h.text for h in hits]}]
    ids, mask = RagRetriever.postprocess_docs(fake, docs, [question], None, len(hits),
                                              return_tensors="pt")
    return ids, mask


def _trim_to(tokenizer: Any, question: str, title: str, text: str, target: int) -> str | None:
    from ragdesk.core.engine.generators import rag_input_text

    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    for n in range(len(ids), 0, -1):
        cut: str = tokenizer.decode(ids[:n]).strip()
        if len(tokenizer(rag_input_text(title, cut, question))["input_ids"]) == target:
            return cut
    return None


def make_case(tiny_models: Any, tokenizer: Any, config: Any, seed: int, *,
              equal_length: int = 0, n_docs: int = N_DOCS, words: int = 100) -> Case:
    """K passages from the corpus the tiny tokenizers saw, with random retrieval scores.

    ``equal_length``: trim every passage so that each generator input has exactly this many
    tokens (then the reference needs no padding).
    """
    import random

    import torch

    rng = random.Random(seed)
    question = rng.choice(["who wrote the first book", "when was the city founded",
                           "what is the largest animal", "where did the war start"])
    corpus = list(tiny_models.corpus)
    rng.shuffle(corpus)
    hits: list[Hit] = []
    for i, (title, text) in enumerate(corpus):
        body = " ".join(text.split()[:words])
        if equal_length:
            cut = _trim_to(tokenizer, question, title, body, equal_length)
            if cut is None:
                continue
            body = cut
        hits.append(Hit(id=i, title=title, text=body, score=round(rng.gauss(70.0, 2.0), 3)))
        if len(hits) == n_docs:
            break
    ids, mask = reference_inputs(tokenizer, config, question, hits)
    scores = torch.tensor([[h.score for h in hits]], dtype=torch.float32)
    return Case(question, hits, ids, mask, scores, equal_length)


@pytest.fixture(scope="session")
def make_cases(tiny_models: Any, bart_gen: Any, rag_token_ref: Any) -> Any:
    cache: dict[tuple[int, int], Case] = {}

    def make(seed: int, equal_length: int = 0) -> Case:
        key = (seed, equal_length)
        if key not in cache:
            cache[key] = make_case(tiny_models, bart_gen.tokenizer, rag_token_ref.config, seed,
                                   equal_length=equal_length)
        return cache[key]

    return make


def strip_special(gen: Any, seq: Any) -> list[int]:
    """Generated ids of a reference output row, without the start token and specials."""
    return [int(t) for t in seq.tolist()[1:] if not gen.is_special(int(t))]
