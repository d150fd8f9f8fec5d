"""The session (composition root): which pack answers, one snapshot library shared by every
engine, one engine per pack, and closing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragdesk.core.app import AppContext
from ragdesk.core.errors import EncoderMismatchError, NotFoundError
from ragdesk.core.session import Session, pack_for, resolve_pack_name

SNAP = "wiki"


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory, tiny_models: Any) -> Path:
    """A data directory with one DPR snapshot (active, no pack of its own) and a custom
    pack "tiny" of tiny DPR + BART models."""
    from ragdesk.core.models import PackSpec, register_pack
    from ragdesk.core.snapshots import import_snapshot

    root = tmp_path_factory.mktemp("session-data")
    app = AppContext(root)
    src = root / "p.jsonl"
    src.write_text("".join(json.dumps({"title": t, "text": " ".join(x.split()[:60])}) + "\n"
                           for t, x in tiny_models.corpus[:12]), encoding="utf-8")
    import_snapshot(app.data, app.catalog, src, name=SNAP,
                    encoder=str(tiny_models.ctx_encoder), fmt="jsonl")
    app.catalog.set_active(SNAP)
    register_pack(app.catalog, PackSpec(
        name="tiny", kind="custom", question_encoder=str(tiny_models.question_encoder),
        passage_encoder=str(tiny_models.ctx_encoder), generator=str(tiny_models.bart),
        generator_kind="seq2seq", encoder_family="dpr", encoder_dim=32))
    app.close()
    return root


@pytest.fixture()
def app(data_root: Path) -> Any:
    ctx = AppContext(data_root)
    yield ctx
    ctx.catalog.update_snapshot(SNAP, default_pack=None)
    ctx.settings.update({"model_pack": None})
    ctx.close()


def test_the_pack_asked_for_comes_first(app: AppContext) -> None:
    app.settings.set("model_pack", "dpr-bart")
    app.catalog.update_snapshot(SNAP, default_pack="rag-token-nq")
    assert resolve_pack_name(app, "tiny") == "tiny"


def test_a_chosen_pack_beats_the_snapshots_own(app: AppContext) -> None:
    """The old order let a snapshot's default_pack override what the user chose."""
    app.catalog.update_snapshot(SNAP, default_pack="rag-token-nq")
    app.settings.set("model_pack", "tiny")
    assert resolve_pack_name(app) == "tiny"
    assert resolve_pack_name(app, snapshot=SNAP) == "tiny"


def test_without_a_choice_the_snapshots_own_pack_then_the_starter(app: AppContext) -> None:
    app.settings.update({"model_pack": None})
    assert resolve_pack_name(app) == "starter"
    app.catalog.update_snapshot(SNAP, default_pack="tiny")
    assert resolve_pack_name(app) == "tiny"
    assert resolve_pack_name(app, snapshot=SNAP) == "tiny"


def test_writing_other_settings_does_not_turn_the_default_pack_into_a_choice(
        app: AppContext) -> None:
    app.settings.update({"model_pack": None})
    app.settings.set("theme", "dark")  # any write used to store every default too
    saved = json.loads(app.data.settings_path.read_text(encoding="utf-8"))
    assert "model_pack" not in saved or saved["model_pack"] is None
    assert app.settings.chosen("model_pack") is None
    assert app.settings.get("mode") == "token"  # defaults still read
    app.catalog.update_snapshot(SNAP, default_pack="tiny")
    assert resolve_pack_name(app) == "tiny"


def test_engines_share_the_sessions_library_and_load_once_per_pack(app: AppContext) -> None:
    session = Session(app)
    try:
        engine = session.engine("tiny")
        assert engine.library is session.library  # not a library of its own
        assert session.engine("tiny") is engine
        assert session.engine_loaded("tiny") and not session.engine_loaded("starter")
        ans = engine.answer("who wrote the first book", n_docs=2, max_new_tokens=3)
        assert ans.snapshot == SNAP and len(ans.docs) == 2
        other = session.load_engine(pack="tiny", snapshot=SNAP)  # a new one, same library
        assert other is not engine and other.library is session.library
    finally:
        session.close()


def test_closing_an_engine_of_load_engine_closes_its_data_directory(
        data_root: Path, tiny_models: Any) -> None:
    from ragdesk import load_engine

    engine = load_engine(pack="tiny", data_dir=data_root)
    library: Any = engine.library
    assert engine.answer("who?", n_docs=2, max_new_tokens=2).snapshot == SNAP
    engine.close()
    assert library._open == {}  # its snapshots were closed with it
    engine.close()  # twice is harmless


def test_encoder_space_is_checked_before_a_model_loads(app: AppContext, tiny_models: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from ragdesk.core.models import PackSpec, loading
    from ragdesk.core.snapshots import open_snapshot

    def refuse(*a: object, **k: object) -> None:
        raise AssertionError("a model was loaded before the check")

    monkeypatch.setattr(loading, "load_question_encoder", refuse)
    wrong = PackSpec(name="st", kind="custom", question_encoder=str(tiny_models.st_encoder),
                     passage_encoder=None, generator=str(tiny_models.bart),
                     generator_kind="seq2seq", encoder_family="sentence-transformers",
                     encoder_dim=32)
    snapshot = open_snapshot(app.data, app.catalog, SNAP)
    try:
        with pytest.raises(EncoderMismatchError):
            Session(app).question_encoder_for(wrong, snapshot.encoder, SNAP)
    finally:
        snapshot.close()


def test_unknown_names_are_refused_before_loading(app: AppContext) -> None:
    session = Session(app)
    try:
        with pytest.raises(NotFoundError):
            session.load_engine(snapshot="no-such-snapshot")
        with pytest.raises(NotFoundError):
            session.load_engine(pack="no-such-pack")
    finally:
        session.close()


def test_a_chosen_pack_that_cannot_query_the_snapshot_gives_way_to_its_own(
        app: AppContext) -> None:
    """The starter pack (MiniLM, 384-d) chosen, a DPR snapshot (32-d) whose own pack fits:
    the snapshot's pack answers instead of every question failing on the encoder space."""
    app.catalog.update_snapshot(SNAP, default_pack="tiny")
    app.settings.set("model_pack", "starter")
    assert resolve_pack_name(app) == "tiny"
    app.settings.set("model_pack", "tiny")
    app.catalog.update_snapshot(SNAP, default_pack="starter")
    assert resolve_pack_name(app) == "tiny"  # a chosen pack that fits still wins
    app.catalog.update_snapshot(SNAP, default_pack=None)
    app.settings.set("model_pack", "starter")
    assert resolve_pack_name(app) == "starter"  # nothing fits better: the check says why


def test_pack_for_takes_the_choice_it_is_given_not_the_settings(app: AppContext) -> None:
    """The GUI passes the choice it holds (its settings write may not have landed yet)."""
    app.settings.set("model_pack", "dpr-bart")
    assert pack_for(app, "tiny", SNAP) == "tiny"
    assert pack_for(app, None, SNAP) == "starter"  # no choice, no pack of its own
    app.catalog.update_snapshot(SNAP, default_pack="tiny")
    assert pack_for(app, None, SNAP) == "tiny"
    assert pack_for(app, None, None) == "tiny"  # None: the active snapshot


def test_pack_for_a_choice_that_cannot_query_the_snapshot_is_its_own_pack(
        app: AppContext) -> None:
    app.catalog.update_snapshot(SNAP, default_pack="tiny")
    assert pack_for(app, "starter", SNAP) == "tiny"  # MiniLM 384-d questions, 32-d passages
    app.catalog.update_snapshot(SNAP, default_pack="starter")
    assert pack_for(app, "tiny", SNAP) == "tiny"  # a choice that fits wins over its own
    app.catalog.update_snapshot(SNAP, default_pack=None)
    assert pack_for(app, "starter", SNAP) == "starter"  # nothing better: the check says why


def test_resolve_pack_name_is_pack_for_with_the_settings_choice(app: AppContext) -> None:
    app.catalog.update_snapshot(SNAP, default_pack="tiny")
    for chosen in (None, "starter", "tiny"):
        app.settings.update({"model_pack": chosen})
        assert resolve_pack_name(app, None, SNAP) == pack_for(app, chosen, SNAP)
