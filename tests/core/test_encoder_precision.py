"""`index import --precision`: what a snapshot's passages and questions are computed in,
recorded in its manifest, shown by `index list`, and followed by the questions asked of it.

The reference is transformers' own DPR classes in float32, called directly (DPR encodes a
passage as the sentence pair (title, text) and takes the projected CLS vector)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from ragdesk.core.encoders import (
    BFLOAT16,
    FAST_ENV,
    FLOAT32,
    EncoderPrecision,
    default_precision,
    load_encoder,
)
from tests.core.snapshots.util import write_jsonl

Cli = Callable[..., tuple[int, str, str]]
QUESTIONS = ["who wrote the origin of species", "what is the capital of france",
             "when did the war end", "largest planet of the solar system",
             "how many legs does a spider have"]


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    t = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(t)


def _reference_top1(tiny_models: Any, passages: list[tuple[str, str]], question: str
                    ) -> tuple[int, float]:
    """(passage id, score) of the best q·d, everything computed by transformers in float32."""
    from transformers import AutoTokenizer, DPRContextEncoder, DPRQuestionEncoder

    ctx = DPRContextEncoder.from_pretrained(str(tiny_models.ctx_encoder)).eval().float()
    qenc = DPRQuestionEncoder.from_pretrained(str(tiny_models.question_encoder)).eval().float()
    ctok = AutoTokenizer.from_pretrained(str(tiny_models.ctx_encoder))
    qtok = AutoTokenizer.from_pretrained(str(tiny_models.question_encoder))
    with torch.no_grad():
        enc = ctok([t for t, _ in passages], [x for _, x in passages], truncation="only_second",
                   max_length=512, padding=True, return_tensors="pt")
        d = ctx(**enc).pooler_output.double().numpy()
        q = qenc(**qtok([question], return_tensors="pt")).pooler_output.double().numpy()[0]
    scores = d @ q
    best = int(np.argmax(scores))
    return best, float(scores[best])


def _ragdesk_top1(data_dir: Path, tiny_models: Any, name: str, question: str
                  ) -> tuple[int, float, str, list[tuple[str, str]]]:
    """(id, score) of ragdesk's own top hit, with the precision its question ran in and the
    snapshot's passages."""
    from ragdesk.core.app import AppContext
    from ragdesk.core.retrieval.request import RetrievalRequest, encode_question
    from ragdesk.core.snapshots import open_snapshot

    app = AppContext(data_dir)
    index = open_snapshot(app.data, app.catalog, name, "flat")
    try:
        qenc = load_encoder(tiny_models.question_encoder, role="question")
        req = RetrievalRequest(question=question, n_docs=1, snapshot=index,
                               question_encoder=qenc)
        hit = index.search(encode_question(req), 1)[0][0]
        ran = qenc.at_precision(index.query_precision).precision
        rows = [(p.title, p.text) for p in index.get_passages(list(range(index.size)))]
    finally:
        index.close()
        app.close()
    return hit.id, hit.score, ran, rows


def _import(cli: Cli, tiny_models: Any, src: Path, name: str, *extra: str) -> None:
    code, _, err = cli("index", "import", str(src), "--name", name, "--encoder",
                       str(tiny_models.ctx_encoder), *extra)
    assert code == 0, err


@pytest.fixture()
def corpus(tiny_models: Any, tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "c.jsonl", list(tiny_models.corpus[:12]))


def test_float32_scores_equal_transformers_q_dot_d(cli: Cli, data_dir: Path, tiny_models: Any,
                                                   corpus: Path, bf16_kernel_here: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FAST_ENV, raising=False)  # the explicit choice decides, not the env
    _import(cli, tiny_models, corpus, "exact", "--precision", "float32")
    _import(cli, tiny_models, corpus, "fast", "--precision", "bfloat16")
    worst = {"exact": 0.0, "fast": 0.0}
    for question in QUESTIONS:
        for name in worst:
            got_id, got, ran, rows = _ragdesk_top1(data_dir, tiny_models, name, question)
            ref_id, ref = _reference_top1(tiny_models, rows, question)
            assert ran == (BFLOAT16 if name == "fast" and bf16_kernel_here else FLOAT32)
            if name == "exact":
                assert got_id == ref_id, question
            worst[name] = max(worst[name], abs(got - ref) / max(1.0, abs(ref)))
    assert worst["exact"] <= 1e-4, worst
    if bf16_kernel_here:
        # the bfloat16 snapshot really is another computation, which the reference tells apart
        assert worst["fast"] > 1e-4, worst
    else:  # it fell back to the exact forward
        assert worst["fast"] <= 1e-4, worst


def test_the_manifest_and_list_show_the_precision(cli: Cli, data_dir: Path, tiny_models: Any,
                                                  corpus: Path, bf16_kernel_here: bool,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FAST_ENV, raising=False)
    _import(cli, tiny_models, corpus, "default")
    _import(cli, tiny_models, corpus, "bf", "--precision", "bfloat16")
    code, out, _ = cli("index", "list", "--json")
    assert code == 0
    listed = {s["name"]: s["precision"] for s in json.loads(out)}
    # DPR's default is float32 throughout, whatever the CPU; bfloat16 asked for is recorded
    # as it ran (float32 where this CPU cannot run the kernel)
    bf = BFLOAT16 if bf16_kernel_here else FLOAT32
    assert listed == {"default": {"passages": "float32", "questions": "float32"},
                      "bf": {"passages": bf, "questions": bf}}
    code, out, _ = cli("index", "list")
    row = {ln.split()[1 if ln.startswith("*") else 0]: ln for ln in out.splitlines()[1:]}
    assert (bf in row["bf"]) and "bfloat16" not in row["default"]
    assert "float32" in row["default"]
    manifest = json.loads(next((data_dir / "snapshots").glob("bf*/manifest.json")).read_text())
    assert manifest["precision"] == {"passages": bf, "questions": bf}
    code, _, err = cli("index", "import", str(corpus), "--name", "x", "--encoder",
                       str(tiny_models.ctx_encoder), "--precision", "float16")
    assert code == 2 and "float16" in err


def test_sentence_transformers_default_follows_the_cpu(tiny_models: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from ragdesk.core.cpu import cpu_has_native_bf16

    monkeypatch.delenv(FAST_ENV, raising=False)
    st = load_encoder(tiny_models.st_encoder, role="passage").info
    dpr = load_encoder(tiny_models.ctx_encoder, role="passage").info
    fast = BFLOAT16 if cpu_has_native_bf16() else FLOAT32
    assert default_precision(st) == EncoderPrecision(passages=fast, questions=FLOAT32)
    assert default_precision(dpr) == EncoderPrecision.both(FLOAT32)
    monkeypatch.setenv(FAST_ENV, "float32")
    assert default_precision(st) == EncoderPrecision.both(FLOAT32)


def test_at_precision_twins_share_the_model_and_come_back(tiny_models: Any,
                                                          bf16_kernel_here: bool) -> None:
    enc = load_encoder(tiny_models.st_encoder, role="question")
    twin = enc.at_precision(BFLOAT16)
    if not bf16_kernel_here:  # the exact forward stands in, and says so
        assert twin is enc and twin.precision == FLOAT32 and enc.at_precision(BFLOAT16) is enc
        return
    assert twin is not enc and twin.model is enc.model and twin.precision == BFLOAT16
    assert enc.at_precision(BFLOAT16) is twin  # made once, not per question
    assert twin.at_precision(FLOAT32) is enc and enc.at_precision(FLOAT32) is enc
    assert enc.kernel is None and enc.precision == FLOAT32


def test_a_folder_of_documents_records_its_precision(cli: Cli, tiny_models: Any,
                                                      tmp_path: Path, bf16_kernel_here: bool,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FAST_ENV, raising=False)
    docs = tmp_path / "docs"
    docs.mkdir()
    for i, (title, text) in enumerate(tiny_models.corpus[:3]):
        (docs / f"{i}.md").write_text(f"# {title}\n\n{text}\n", encoding="utf-8")
    for name, precision in (("d32", "float32"), ("d16", "bfloat16")):
        code, _, err = cli("index", "import", str(docs), "--name", name, "--encoder",
                           str(tiny_models.st_encoder), "--precision", precision)
        assert code == 0, err
    code, out, _ = cli("index", "list", "--json")
    listed = {s["name"]: s["precision"] for s in json.loads(out)}
    bf = BFLOAT16 if bf16_kernel_here else FLOAT32  # as it ran
    assert listed == {"d32": EncoderPrecision.both(FLOAT32).to_json(),
                      "d16": EncoderPrecision.both(bf).to_json()}
    if not bf16_kernel_here:
        return  # bfloat16 is float32 here: another import in it is the same computation
    # the same folder again in another precision: no vector of the old one is reused
    code, out, err = cli("index", "import", str(docs), "--name", "d32", "--encoder",
                         str(tiny_models.st_encoder), "--precision", "bfloat16", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["reused"] == 0 and res["encoded"] == res["passages"] > 0
    code, out, _ = cli("index", "list", "--json")
    assert {s["name"]: s["precision"] for s in json.loads(out)}["d32"]["passages"] == BFLOAT16


@pytest.mark.parametrize(("chosen", "ran", "recorded"), [
    (EncoderPrecision.both(BFLOAT16), BFLOAT16, EncoderPrecision.both(BFLOAT16)),
    # the kernel fell back: the questions would too, so the record says so
    (EncoderPrecision.both(BFLOAT16), FLOAT32, EncoderPrecision.both(FLOAT32)),
    (EncoderPrecision(passages=BFLOAT16, questions=FLOAT32), FLOAT32,
     EncoderPrecision.both(FLOAT32)),
    (EncoderPrecision.both(FLOAT32), FLOAT32, EncoderPrecision.both(FLOAT32)),
    (EncoderPrecision(passages=FLOAT32, questions=BFLOAT16), FLOAT32,
     EncoderPrecision(passages=FLOAT32, questions=BFLOAT16)),
])
def test_a_snapshot_records_what_ran(chosen: EncoderPrecision, ran: str,
                                     recorded: EncoderPrecision) -> None:
    from ragdesk.core.encoders import as_computed

    assert as_computed(chosen, ran) == recorded
