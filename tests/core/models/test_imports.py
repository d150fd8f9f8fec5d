"""``import_pack``: how a folder maps to a pack's parts, validation before registration, and
copies that ``remove_pack`` deletes again."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, cast

import pytest

from ragdesk.core.catalog import Catalog
from ragdesk.core.errors import (
    AlreadyExistsError,
    BadInputError,
    EncoderMismatchError,
    MissingModelError,
)
from ragdesk.core.models import get_pack, import_pack, load_question_encoder, remove_pack
from ragdesk.core.paths import DataDir
from ragdesk.core.progress import ProgressUpdate


@pytest.fixture()
def data(tmp_path: Path) -> DataDir:
    return DataDir(tmp_path / "data").ensure()


@pytest.fixture()
def catalog(data: DataDir):  # type: ignore[no-untyped-def]
    cat = Catalog(data.catalog_path)
    yield cat
    cat.close()


def test_rag_checkpoint_gives_question_encoder_and_generator(tiny_models: Any, data: DataDir,
                                                             catalog: Catalog) -> None:
    updates: list[ProgressUpdate] = []
    spec = import_pack(data, catalog, tiny_models.rag_token, "my-rag", progress=updates.append)
    rag = str(tiny_models.rag_token.resolve())
    assert (spec.question_encoder, spec.generator, spec.passage_encoder) == (rag, rag, None)
    assert (spec.generator_kind, spec.encoder_family, spec.encoder_dim) == ("seq2seq", "dpr", 32)
    assert cast(dict[str, object], spec.details["question_encoder_info"])["family"] == "dpr"
    assert get_pack(catalog, "my-rag") == spec
    assert updates[-1].done == updates[-1].total == 3


def test_passage_encoder_option(tiny_models, data: DataDir, catalog: Catalog) -> None:  # type: ignore[no-untyped-def]
    spec = import_pack(data, catalog, tiny_models.rag_sequence, "rs",
                       passage_encoder=str(tiny_models.ctx_encoder))
    assert spec.passage_encoder == str(tiny_models.ctx_encoder.resolve())


def test_generator_folder_needs_a_question_encoder(tiny_models, data: DataDir,  # type: ignore[no-untyped-def]
                                                   catalog: Catalog) -> None:
    with pytest.raises(BadInputError, match="seq2seq model; a model pack also needs a question "
                                            "encoder") as err:
        import_pack(data, catalog, tiny_models.bart, "b")
    assert "--question-encoder" in err.value.hint
    assert catalog.list_model_packs() == []
    spec = import_pack(data, catalog, tiny_models.bart, "b",
                       question_encoder=str(tiny_models.st_encoder))
    st = str(tiny_models.st_encoder.resolve())
    # A sentence-transformers model encodes questions and passages alike.
    assert (spec.question_encoder, spec.passage_encoder) == (st, st)
    assert (spec.encoder_family, spec.encoder_dim) == ("sentence-transformers", 24)


def test_gguf_generator(tiny_models, tiny_gguf: Path, data: DataDir,  # type: ignore[no-untyped-def]
                        catalog: Catalog) -> None:
    spec = import_pack(data, catalog, tiny_gguf, "g", question_encoder=str(tiny_models.st_encoder))
    assert spec.generator == str(tiny_gguf.resolve()) and spec.generator_kind == "causal"


def test_encoders_from_different_spaces_are_refused(tiny_models, data: DataDir,  # type: ignore[no-untyped-def]
                                                    catalog: Catalog) -> None:
    with pytest.raises(EncoderMismatchError, match="do not share a vector space"):
        import_pack(data, catalog, tiny_models.bart, "x",
                    question_encoder=str(tiny_models.st_encoder),
                    passage_encoder=str(tiny_models.ctx_encoder))
    assert catalog.list_model_packs() == []


def test_corrupt_folder_is_not_registered(tiny_models, tmp_path: Path, data: DataDir,  # type: ignore[no-untyped-def]
                                          catalog: Catalog) -> None:
    broken = tmp_path / "broken-rag"
    shutil.copytree(tiny_models.rag_sequence, broken)
    blob = (broken / "model.safetensors").read_bytes()
    (broken / "model.safetensors").write_bytes(blob[: len(blob) // 3])
    with pytest.raises(MissingModelError, match="damaged"):
        import_pack(data, catalog, broken, "broken")
    assert catalog.list_model_packs() == []
    assert list(data.models_dir.iterdir()) == []


def test_encoder_with_missing_tensors_is_refused(tiny_models, tmp_path: Path, data: DataDir,  # type: ignore[no-untyped-def]
                                                 catalog: Catalog) -> None:
    """transformers only warns about missing encoder weights; the import check refuses."""
    from safetensors.torch import load_file, save_file

    q = tmp_path / "q"
    shutil.copytree(tiny_models.question_encoder, q)
    state = load_file(str(q / "model.safetensors"))
    save_file({k: v for k, v in state.items() if "layer.1." not in k},
              str(q / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(MissingModelError, match="incomplete or damaged"):
        import_pack(data, catalog, tiny_models.bart, "q", question_encoder=str(q))
    assert catalog.list_model_packs() == []


def test_copy_and_remove(tiny_models, tmp_path: Path, data: DataDir,  # type: ignore[no-untyped-def]
                         catalog: Catalog) -> None:
    src = tmp_path / "src-rag"
    shutil.copytree(tiny_models.rag_sequence, src)
    spec = import_pack(data, catalog, src, "copied", copy=True)
    dest = data.models_dir / "copied"
    assert spec.question_encoder == spec.generator == str(dest / "src-rag")
    shutil.rmtree(src)  # the pack no longer depends on the source
    assert load_question_encoder(spec.question_encoder).dim == 32
    assert not [p for p in dest.iterdir() if p.name.startswith(".")]  # no staging left
    with pytest.raises(AlreadyExistsError):
        import_pack(data, catalog, tiny_models.rag_sequence, "copied", copy=True)
    assert remove_pack(catalog, "copied", data) == [dest.resolve()]
    assert not dest.exists()
    assert catalog.list_model_packs() == []


def test_missing_path(data: DataDir, catalog: Catalog, tmp_path: Path) -> None:
    with pytest.raises(MissingModelError, match="does not exist"):
        import_pack(data, catalog, tmp_path / "nothing", "n")
