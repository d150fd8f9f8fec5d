"""Checkpoints: standard HF folders that the model loaders read back, optimizer state in
safetensors, and a resumed trainer that takes exactly the steps the original would have."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.core.training.helpers import examples as _examples
from tests.core.training.helpers import make_trainer as _trainer


def _params(model) -> dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    return {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("which", ["question_encoder", "st_encoder"])
def test_saved_question_encoder_loads_back_identical(tiny_models: Any, tmp_path: Path,
                                                     which: str) -> None:
    from ragdesk.core.models import load_question_encoder
    from ragdesk.core.training.checkpoint import save_question_encoder

    enc = load_question_encoder(getattr(tiny_models, which))
    save_question_encoder(enc, tmp_path / "qe")
    again = load_question_encoder(tmp_path / "qe")
    for field in ("family", "pooling", "normalize", "dim"):
        assert getattr(again.info, field) == getattr(enc.info, field)
    texts = ["who wrote hamlet", "what is the secret word of alice?"]
    np.testing.assert_allclose(again.encode(texts), enc.encode(texts), rtol=1e-6, atol=1e-6)
    assert not list((tmp_path / "qe").glob("*.bin"))  # safetensors only, no pickles


def test_resumed_trainer_continues_exactly(tiny_models, index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import torch

    from ragdesk.core.models import load_generator, load_question_encoder
    from ragdesk.core.training import checkpoint as ck
    from ragdesk.core.training.config import TrainState
    from ragdesk.core.training.trainer import RagTrainer

    exs = _examples()
    a = _trainer(tiny_models, index, lr=1e-3)
    a.train_step(exs[:4])
    a.state.position = 4
    path = ck.write_checkpoint(tmp_path, a.state.step, a.encoder, a.generator, a.optimizer,
                               {"state": a.state.to_json()})
    assert path.name == "checkpoint-1" and ck.latest_checkpoint(tmp_path) == path
    saved = ck.read_state(path)
    enc = load_question_encoder(path / ck.QUESTION_ENCODER_DIR)
    gen = load_generator(path / ck.GENERATOR_DIR)
    for mine, theirs in ((a.encoder.model, enc.model), (a.generator.model, gen.model)):
        p1, p2 = _params(mine), _params(theirs)
        assert p1.keys() == p2.keys()
        for k in p1:
            np.testing.assert_array_equal(p1[k], p2[k])
    b = RagTrainer(enc, gen, index, a.config, device="cpu",
                   state=TrainState.from_json(saved["state"]))
    ck.load_optimizer_state(b.optimizer, path / ck.OPTIMIZER_FILE,
                            saved["optimizer_param_groups"])
    sa, sb = a.optimizer.state_dict(), b.optimizer.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    assert sa["state"].keys() == sb["state"].keys()
    for pid, st in sa["state"].items():
        for name, t in st.items():
            torch.testing.assert_close(sb["state"][pid][name], t, rtol=0, atol=0)
    assert b.state.step == 1 and b.state.position == 4
    la, lb = a.train_step(exs[4:]), b.train_step(exs[4:])
    assert la == pytest.approx(lb, rel=1e-6)
    assert a.generator is not None and b.generator is not None
    for mine, theirs in ((a.encoder.model, b.encoder.model),
                         (a.generator.model, b.generator.model)):
        for (k, v1), v2 in zip(mine.state_dict().items(), theirs.state_dict().values(),
                               strict=True):
            torch.testing.assert_close(v1, v2, rtol=1e-6, atol=1e-7, msg=k)


def test_old_checkpoints_and_staging_folders_are_cleaned(tiny_models: Any, index: Any,
                                                          tmp_path: Path) -> None:
    from ragdesk.core.training import checkpoint as ck

    tr = _trainer(tiny_models, index, generator_layers=0)  # generator frozen: small optimizer
    for step in (1, 2, 3):
        ck.write_checkpoint(tmp_path, step, tr.encoder, tr.generator, tr.optimizer,
                            {"state": {}}, keep=2)
    assert [s for s, _ in ck.list_checkpoints(tmp_path)] == [2, 3]
    (tmp_path / ".staging-checkpoint-4-123").mkdir()
    ck.clean_staging(tmp_path)
    assert not (tmp_path / ".staging-checkpoint-4-123").exists()
    # a checkpoint is a standard model folder: the generator's files are HF's
    gen_dir = tmp_path / "checkpoint-3" / ck.GENERATOR_DIR
    assert (gen_dir / "config.json").exists() and (gen_dir / "model.safetensors").exists()
    assert (tmp_path / "checkpoint-3" / ck.OPTIMIZER_FILE).exists()


def test_unreadable_checkpoint_state_is_a_user_error(tmp_path: Path) -> None:
    from ragdesk.core.errors import RagdeskError
    from ragdesk.core.training import checkpoint as ck

    bad = tmp_path / "checkpoint-7"
    bad.mkdir()
    (bad / ck.STATE_FILE).write_text("{not json")
    with pytest.raises(RagdeskError, match="checkpoint-7"):
        ck.read_state(bad)
