"""`ragdesk train` end to end with tiny models: training, registration as a custom pack that
`ragdesk ask` uses at once, clean user errors, and resuming after a SIGKILL."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.core.training import synthetic


@pytest.fixture(scope="module")
def tiny_setup(tiny_models: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A data dir with the synthetic snapshot and a pack 'tiny' (tiny sentence-transformers
    encoder for questions and passages, tiny BART generator), plus question files."""
    base = tmp_path_factory.mktemp("cli-train")
    data = base / "data"
    synthetic.build_snapshot(data, tiny_models.st_encoder)
    synthetic.register_tiny_pack(data, "tiny", tiny_models.st_encoder, tiny_models.st_encoder,
                                 tiny_models.bart)
    qs = synthetic.questions()
    return {"data": data, "base": base,
            "train": synthetic.write_jsonl(base / "train.jsonl", qs),
            "long": synthetic.write_jsonl(base / "long.jsonl", qs * 2),
            "dev": synthetic.write_jsonl(base / "dev.jsonl", qs[:4])}


def _cli(data: Path, *argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from ragdesk.cli.main import main

    code = main(["--data-dir", str(data), *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_train_registers_a_pack_that_ask_uses(tiny_models: Any, tiny_setup: dict[str, Path],
                                              tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    data, out = tiny_setup["data"], tmp_path / "run"
    code, stdout, stderr = _cli(
        data, "train", str(tiny_setup["train"]), "--snapshot", "synth", "--pack", "tiny",
        "--out", str(out), "--docs", "4", "--batch-size", "4", "--lr", "1e-3",
        "--eval", str(tiny_setup["dev"]), "--em-limit", "2", "--name", "tiny-ft", "--json",
        capsys=capsys)
    assert code == 0, stderr
    res = json.loads(stdout)
    assert res["pack"] == "tiny-ft" and res["steps"] == 2 and res["epochs"] == 1
    labels = [e["label"] for e in res["evaluations"]]
    assert labels == ["before training", "epoch 1"]
    assert all(e["em_questions"] == 2 and e["n_questions"] == 4 for e in res["evaluations"])
    assert "evaluation (epoch 1, held-out questions)" in stderr and "loss" in stderr
    assert [e["epoch"] for e in res["evaluations"]] == [0, 1]

    from ragdesk.core.app import AppContext
    from ragdesk.core.models import get_pack, load_generator, load_question_encoder

    ctx = AppContext(data)
    try:
        spec = get_pack(ctx.catalog, "tiny-ft")
    finally:
        ctx.close()
    assert spec.kind == "custom" and spec.generator_kind == "seq2seq"
    assert spec.default_mode == "token"  # a trained generator reads as it was trained
    assert Path(spec.question_encoder) == out / "final" / "question_encoder"
    assert Path(spec.generator) == out / "final" / "generator"
    assert spec.passage_encoder == str(tiny_models.st_encoder)  # the snapshot's, unchanged
    # the trained weights are what the pack loads, and they differ from the base pack's
    import torch

    trained = load_generator(spec.generator).model.state_dict()
    base = load_generator(get_pack_generator(data)).model.state_dict()
    assert any(not torch.equal(trained[k], base[k]) for k in trained)
    load_question_encoder(spec.question_encoder)

    code, stdout, stderr = _cli(data, "ask", "--pack", "tiny-ft", "--snapshot", "synth",
                                "--docs", "2", "--max-new-tokens", "4", "--json",
                                "what is the secret word of alice?", capsys=capsys)
    assert code == 0, stderr
    assert json.loads(stdout)["docs"]


def get_pack_generator(data: Path) -> str:
    from ragdesk.core.app import AppContext
    from ragdesk.core.models import get_pack

    ctx = AppContext(data)
    try:
        return get_pack(ctx.catalog, "tiny").generator
    finally:
        ctx.close()


def test_user_errors_exit_cleanly(tiny_setup: dict[str, Path], tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    data = tiny_setup["data"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": ["a"]}\n{"question": 3}\n')
    code, _, err = _cli(data, "train", str(bad), "--snapshot", "synth", "--pack", "tiny",
                        "--out", str(tmp_path / "o"), capsys=capsys)
    assert code != 0 and "bad.jsonl, line 2" in err and "Traceback" not in err
    code, _, err = _cli(data, "train", str(tiny_setup["train"]), "--snapshot", "synth",
                        "--pack", "nope", "--out", str(tmp_path / "o"), capsys=capsys)
    assert code != 0 and "nope" in err
    code, _, err = _cli(data, "train", str(tiny_setup["train"]), "--snapshot", "synth",
                        "--pack", "tiny", "--docs", "99", "--out", str(tmp_path / "o"),
                        "--name", "tiny-docs", capsys=capsys)
    assert code != 0 and "99" in err and "Traceback" not in err
    code, _, err = _cli(data, "train", str(tiny_setup["train"]), "--snapshot", "synth",
                        "--pack", "tiny", "--docs", "0", "--out", str(tmp_path / "o"),
                        capsys=capsys)
    assert code == 2 and "number of passages per question must be at least 1, not 0" in err
    assert "--docs 1 or more" in err  # the option to change, not the field's name
    code, out, _ = _cli(data, "train", str(tiny_setup["train"]), "--snapshot", "synth",
                        "--pack", "tiny", "--lr", "-1", "--out", str(tmp_path / "o"),
                        "--json", capsys=capsys)
    assert code == 2 and "--lr" in json.loads(out)["hint"]  # not "hint": null


def _train_cmd(setup: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "ragdesk", "--data-dir", str(setup["data"]), "train",
            str(setup["long"]), "--snapshot", "synth", "--pack", "tiny", "--out", str(out),
            "--docs", "4", "--batch-size", "1", "--lr", "1e-3", "--checkpoint-every", "2",
            "--no-register", "--json", *extra]


def _env() -> dict[str, str]:
    # one thread: identical arithmetic in every process, so runs can be compared exactly
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def _tensors(folder: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(folder / "model.safetensors"))


@pytest.mark.slow
def test_resume_after_sigkill_continues_from_the_checkpoint(tiny_setup) -> None:  # type: ignore[no-untyped-def]
    from ragdesk.core.training import checkpoint as ck

    base = tiny_setup["base"]
    out, ref_out = base / "killed", base / "reference"
    proc = subprocess.Popen(_train_cmd(tiny_setup, out), env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            cks = ck.list_checkpoints(out)
            if cks and cks[-1][0] >= 4:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the run ended before it could be killed: " + (
            proc.stderr.read().decode() if proc.stderr else "")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "final").exists()
    killed_at = ck.latest_checkpoint(out)
    assert killed_at is not None
    saved = ck.read_state(killed_at)["state"]
    assert 4 <= saved["step"] < 16
    kept = base / "checkpoint-at-kill"  # the resumed run deletes it once it has a newer one
    shutil.copytree(killed_at, kept)

    resumed = subprocess.run(_train_cmd(tiny_setup, out), env=_env(), capture_output=True,
                             text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    res = json.loads(resumed.stdout)
    assert res["resumed_from"] == str(killed_at)
    assert f"resuming from {killed_at} (step {saved['step']}" in resumed.stderr
    assert res["steps"] == 16  # 16 questions, batch 1, one epoch: the count carried on

    reference = subprocess.run(_train_cmd(tiny_setup, ref_out, "--keep-checkpoints", "100"),
                               env=_env(),
                               capture_output=True, text=True, timeout=600)
    assert reference.returncode == 0, reference.stderr
    assert json.loads(reference.stdout)["resumed_from"] is None

    # The killed run's checkpoint holds the weights the uninterrupted run had at that step,
    # and resuming from it takes the same steps (same losses) to the same final weights.
    _assert_same(kept, ref_out / killed_at.name)
    run = json.loads((out / "final" / "training.json").read_text())["state"]
    ref = json.loads((ref_out / "final" / "training.json").read_text())["state"]
    assert run["step"] == ref["step"] == 16 and run["examples_seen"] == 16
    np.testing.assert_allclose(run["losses"], ref["losses"], rtol=1e-5)
    _assert_same(out / "final", ref_out / "final")


def _assert_same(a_dir: Path, b_dir: Path) -> None:
    from ragdesk.core.training import checkpoint as ck

    for part in (ck.QUESTION_ENCODER_DIR, ck.GENERATOR_DIR):
        a, b = _tensors(a_dir / part), _tensors(b_dir / part)
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_allclose(a[k], b[k], rtol=1e-5, atol=1e-6, err_msg=f"{part} {k}")


def test_retriever_only_training_registers_a_tuned_pack(
        tiny_models: Any, tiny_setup: dict[str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """--generator-layers 0 on a Gemma 3 pack: only the question encoder is written, the
    tuned pack reads with the base pack's generator, `models list` shows it and `ask --pack`
    retrieves with the tuned encoder."""
    if tiny_models.gemma3 is None:
        pytest.skip("this transformers has no Gemma 3")
    data, out = tiny_setup["data"], tmp_path / "run"
    synthetic.register_tiny_pack(data, "tiny-gemma", tiny_models.st_encoder,
                                 tiny_models.st_encoder, tiny_models.gemma3, kind="causal")
    code, stdout, stderr = _cli(
        data, "train", str(tiny_setup["train"]), "--snapshot", "synth", "--pack", "tiny-gemma",
        "--out", str(out), "--docs", "4", "--batch-size", "4", "--lr", "1e-2",
        "--generator-layers", "0", "--precision", "float32", "--eval", str(tiny_setup["dev"]),
        "--em-limit", "0", "--name", "tiny-tuned", "--json", capsys=capsys)
    assert code == 0, stderr
    assert "p(y|x,z) from the engine's inference path (float32)" in stderr
    assert "training on " in stderr and " of 8 questions" in stderr
    assert "guard (epoch 1): p(z|x) at tau 0.05" in stderr  # the tiny normalized encoder's τ
    assert json.loads(stdout)["pack"] == "tiny-tuned"
    assert (out / "final" / "question_encoder").is_dir()
    assert not (out / "final" / "generator").exists()  # frozen: the base pack's is used
    assert not list(out.glob("checkpoint-*/generator"))

    code, stdout, stderr = _cli(data, "models", "list", "--json", capsys=capsys)
    assert code == 0, stderr
    listed = {p["name"]: p for p in json.loads(stdout)}
    tuned = listed["tiny-tuned"]
    assert tuned["installed"] and tuned["kind"] == "custom"
    assert tuned["generator"] == str(tiny_models.gemma3)
    assert tuned["question_encoder"] == str(out / "final" / "question_encoder")
    assert "retriever tuned" in tuned["description"]
    assert "held-out top-4" in tuned["description"]  # --eval questions are not trained on

    question = "what is the secret word of alice?"
    code, stdout, stderr = _cli(data, "ask", "--pack", "tiny-tuned", "--snapshot", "synth",
                                "--docs", "2", "--max-new-tokens", "4", "--json", question,
                                capsys=capsys)
    assert code == 0, stderr
    docs = json.loads(stdout)["docs"]
    from ragdesk.core.models import load_question_encoder
    from tests.core.training.helpers import open_index

    ctx, index = open_index(data)
    try:
        emb = np.asarray(index.embeddings(), dtype=np.float32)
    finally:
        index.close()
        ctx.close()
    ids = [d["id"] for d in docs]
    tuned_q = load_question_encoder(out / "final" / "question_encoder").encode([question])[0]
    base_q = load_question_encoder(tiny_models.st_encoder).encode([question])[0]
    scores = np.array([d["score"] for d in docs])
    np.testing.assert_allclose(scores, emb[ids] @ tuned_q, rtol=1e-4, atol=1e-5)
    assert not np.allclose(emb[ids] @ base_q, emb[ids] @ tuned_q, atol=1e-5)

    # a second epoch resumes from the checkpoint, which holds no generator: the base pack's
    # is read again, and the questions chosen before training are kept
    from ragdesk.core.training import checkpoint as ck

    latest = ck.latest_checkpoint(out)
    assert latest is not None
    before = ck.read_state(latest)["state"]["selected"]
    code, stdout, stderr = _cli(
        data, "train", str(tiny_setup["train"]), "--snapshot", "synth", "--pack", "tiny-gemma",
        "--out", str(out), "--docs", "4", "--batch-size", "4", "--lr", "1e-2",
        "--generator-layers", "0", "--precision", "float32", "--eval", str(tiny_setup["dev"]),
        "--em-limit", "0", "--name", "tiny-tuned", "--epochs", "2", "--json", capsys=capsys)
    assert code == 0, stderr
    res = json.loads(stdout)
    assert res["resumed_from"] and res["epochs"] == 2 and "training on" not in stderr
    final_state = json.loads((out / "final" / "training.json").read_text())["state"]
    assert final_state["selected"] == before
    assert res["steps"] == 2 * ((len(before) + 3) // 4)
    assert not (out / "final" / "generator").exists()


def test_the_passages_objective_trains_the_question_encoder_alone(
        tiny_models: Any, tiny_setup: dict[str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """--objective passages freezes the generator without being told (--generator-layers 0),
    keeps the questions with a gold answer in the top 100, and writes a retriever-only pack."""
    data, out = tiny_setup["data"], tmp_path / "run"
    synthetic.register_tiny_pack(data, "tiny-st", tiny_models.st_encoder,
                                 tiny_models.st_encoder, tiny_models.bart, kind="seq2seq",
                                 default_mode="sequence")
    code, stdout, stderr = _cli(
        data, "train", str(tiny_setup["train"]), "--snapshot", "synth", "--pack", "tiny-st",
        "--out", str(out), "--objective", "passages", "--batch-size", "4", "--lr", "1e-3",
        "--no-eval-before", "--name", "tiny-passages", "--json", capsys=capsys)
    assert code == 0, stderr
    assert "objective passages" in stderr and "among its top 100" in stderr
    assert "p(y|x,z) from" not in stderr  # the generator is not read
    assert "training on 8 of 8 questions" in stderr
    assert json.loads(stdout)["pack"] == "tiny-passages"
    assert (out / "final" / "question_encoder").is_dir()
    assert not (out / "final" / "generator").exists()
    from ragdesk.core.app import AppContext
    from ragdesk.core.models import get_pack

    ctx = AppContext(data)
    try:  # the frozen reader reads as in its own pack
        assert get_pack(ctx.catalog, "tiny-passages").default_mode == "sequence"
    finally:
        ctx.close()

    code, _stdout, stderr = _cli(
        data, "train", str(tiny_setup["train"]), "--snapshot", "synth", "--pack", "tiny-st",
        "--out", str(tmp_path / "run2"), "--objective", "passages", "--generator-layers", "2",
        capsys=capsys)
    assert code == 2 and "question encoder alone" in stderr
