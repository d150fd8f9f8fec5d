"""On a CUDA GPU (``RAGDESK_DEVICE=cuda``), the engine answers as it does on the CPU: the same
tokens, log-probabilities and passage posteriors, for every reading mode and both kinds of
generator, loaded by the code that loads real checkpoints; the encoders give the same vectors.
Skipped where torch sees no CUDA device (CI has none)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

QUESTION = "who wrote the first book"


def _hits(tiny_models: Any, n: int = 4) -> list[Any]:
    from ragdesk.core.types import Hit

    corpus = list(tiny_models.corpus)[:n]
    return [Hit(i, t, " ".join(x.split()[:60]), 70.0 - i) for i, (t, x) in enumerate(corpus)]


def _same_answers(ref: str | Path, mode: str, tiny_models: Any, **options: Any) -> None:
    from ragdesk.core.engine import Engine
    from ragdesk.core.models import load_generator

    hits = _hits(tiny_models)
    answers = []
    for device in ("cpu", "cuda"):
        gen = load_generator(ref, device=device, precision="float32", answering=True)
        assert gen.device.type == device
        answers.append(Engine(None, gen).answer_from_docs(  # type: ignore[arg-type]
            QUESTION, hits, mode=mode, max_new_tokens=6, **options))
    cpu, gpu = answers
    assert gpu.token_ids == cpu.token_ids and cpu.token_ids
    assert gpu.text == cpu.text
    assert gpu.logprob == pytest.approx(cpu.logprob, abs=1e-3)
    for a, b in zip(cpu.tokens, gpu.tokens, strict=True):
        assert b.posterior == pytest.approx(a.posterior, abs=1e-4)
    assert [d.prob for d in gpu.docs] == pytest.approx([d.prob for d in cpu.docs], abs=1e-6)


@pytest.mark.parametrize("mode,beams", [("token", 1), ("token", 2), ("sequence", 2)])
def test_bart_answers_on_the_gpu_as_on_the_cpu(tiny_models: Any, mode: str,
                                               beams: int) -> None:
    _same_answers(tiny_models.bart, mode, tiny_models, num_beams=beams)


@pytest.mark.parametrize("mode", ["token", "sequence", "together"])
def test_gemma_answers_on_the_gpu_as_on_the_cpu(tiny_models: Any, mode: str) -> None:
    if tiny_models.gemma3 is None:
        pytest.skip("this transformers has no Gemma 3")
    _same_answers(tiny_models.gemma3, mode, tiny_models, num_beams=1)


def test_qwen2_answers_and_reads_from_memory_on_the_gpu_as_on_the_cpu(
        tiny_models: Any, tmp_path: Path) -> None:
    from ragdesk.core.engine.memory_answer import memory_answer
    from ragdesk.core.engine.request import keyword_request
    from ragdesk.core.models import load_generator

    from .test_qwen2_decoder import build_tiny_qwen2

    model, tok = build_tiny_qwen2(tiny_models)
    model.save_pretrained(tmp_path / "qwen2")
    tok.save_pretrained(tmp_path / "qwen2")
    _same_answers(tmp_path / "qwen2", "together", tiny_models, num_beams=1)
    texts = []
    for device in ("cpu", "cuda"):
        gen = load_generator(tmp_path / "qwen2", device=device, precision="float32",
                             answering=True)
        req = keyword_request(gen, QUESTION, "together", num_beams=1, max_new_tokens=6,
                              min_new_tokens=0, style="short", grounded=True, temperature=1.0,
                              snapshot=None)
        mem = memory_answer(gen, req, _hits(tiny_models))
        texts.append((mem.token_ids, mem.logprob))
    assert texts[1][0] == texts[0][0] and texts[0][0]
    assert texts[1][1] == pytest.approx(texts[0][1], abs=1e-3)


@pytest.mark.parametrize("which", ["st_encoder", "question_encoder"])
def test_encoders_give_the_same_vectors_on_the_gpu(tiny_models: Any, which: str) -> None:
    import numpy as np

    from ragdesk.core.encoders import load_encoder

    texts = [QUESTION, *(t for _, t in list(tiny_models.corpus)[:7])]
    role = "question" if which == "question_encoder" else "passage"
    vecs = [np.asarray(load_encoder(getattr(tiny_models, which), role=role,
                                    device=device).encode(texts))
            for device in ("cpu", "cuda")]
    assert vecs[1].shape == vecs[0].shape
    assert np.abs(vecs[1] - vecs[0]).max() < 1e-4 * max(1.0, float(np.abs(vecs[0]).max()))


@pytest.mark.parametrize("precision", ["bfloat16", "int8"])
def test_the_other_precisions_answer_on_the_gpu(tiny_models: Any, precision: str) -> None:
    """bfloat16 runs on the GPU; int8 (the CPU's quantized kernels) falls back to float32
    there, and then answers exactly as float32 does."""
    import math

    from ragdesk.core.engine import Engine
    from ragdesk.core.models import load_generator

    if tiny_models.gemma3 is None:
        pytest.skip("this transformers has no Gemma 3")
    hits = _hits(tiny_models)
    answers = []
    for p in (precision, "float32"):
        gen = load_generator(tiny_models.gemma3, device="cuda", precision=p, answering=True)
        assert gen.device.type == "cuda"
        answers.append(Engine(None, gen).answer_from_docs(  # type: ignore[arg-type]
            QUESTION, hits, mode="token", max_new_tokens=6))
    ans, exact = answers
    assert ans.token_ids and math.isfinite(ans.logprob)
    if precision == "int8":
        assert ans.token_ids == exact.token_ids
        assert ans.logprob == pytest.approx(exact.logprob, abs=1e-3)
