"""Index manager ▸ Import… opened before the window has listed the model packs (it reads them
off the GUI thread as it opens): the dialog chooses the pack's passage encoder once they
arrive, and an encoder the user chose or typed meanwhile stays."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from ragdesk.ui.import_dialog import ImportDialog
from ragdesk.ui.infos import PackInfo
from tests.ui.conftest import SharedModelsBackend, open_window


def test_an_import_opened_before_the_packs_are_listed_gets_the_packs_encoder(
        qtbot: Any, ui_data: Path, tiny_parts: tuple[Any, Any], tiny_models: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    listed = threading.Event()
    real_packs = SharedModelsBackend.packs

    def late_packs(self: SharedModelsBackend) -> list[PackInfo]:
        listed.wait(30)
        return real_packs(self)

    monkeypatch.setattr(SharedModelsBackend, "packs", late_packs)
    SharedModelsBackend.parts = tiny_parts
    w = open_window(qtbot, ui_data, SharedModelsBackend)
    try:
        dlg = w.open_index_manager().open_import()
        assert w.state.packs == [] and dlg.encoder_ref() == ""
        with qtbot.waitSignal(w.state.packsChanged, timeout=30_000):
            listed.set()
        assert dlg.encoder_ref() == str(tiny_models.ctx_encoder)
    finally:
        listed.set()
        w.shutdown()
        w.backend.ctx.close()


def test_packs_listed_late_keep_the_encoder_the_user_typed_or_chose(qtbot: Any) -> None:
    typed = ImportDialog(None, taken=[], encoders=[], default_encoder=None)
    qtbot.addWidget(typed)
    typed.encoder.setEditText("/models/mine")
    typed.offer_encoders(["enc-a", "enc-b"], "enc-a")
    assert typed.encoder_ref() == "/models/mine"
    assert typed.encoder.findData("enc-b") >= 0  # listed all the same

    chose = ImportDialog(None, taken=[], encoders=["enc-a", "enc-b"], default_encoder="enc-a")
    qtbot.addWidget(chose)
    chose.encoder.setCurrentIndex(chose.encoder.findData("enc-b"))
    chose.offer_encoders(["enc-a", "enc-b", "enc-c"], "enc-a")
    assert chose.encoder_ref() == "enc-b" and chose.encoder.count() == 3
