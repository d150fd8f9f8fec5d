"""The settings dialog: current values shown, problems shown beside their fields and nothing
saved, valid changes saved (read back from the files), restarts named."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox

from ragdesk.core import preferences
from ragdesk.core.paths import ENV_VAR, location_file, resolve_data_dir
from ragdesk.core.settings import Settings
from ragdesk.ui import settings_dialog
from ragdesk.ui.background import op_background
from ragdesk.ui.ops import OpRunner
from ragdesk.ui.settings_dialog import SettingsDialog
from tests.ui.settle import settle

TIMEOUT_MS = 10_000


@pytest.fixture(autouse=True)
def own_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cfg = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(cfg))
    monkeypatch.delenv(ENV_VAR, raising=False)
    return cfg


@pytest.fixture()
def runner(qapp: Any) -> Iterator[OpRunner]:
    r = OpRunner()
    yield r
    assert r.shutdown(5_000)
    r.deleteLater()


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    Settings(d / "settings.json").update({"theme": "dark", "n_docs": 7, "mode": "sequence",
                                          "device": "cpu", "threads": 2})
    return d


def make_dialog(qtbot: Any, data: Path, runner: OpRunner,
                overrides: dict[str, str] | None = None) -> SettingsDialog:
    dlg = SettingsDialog(Settings(data / "settings.json"), data, op_background(runner),
                         overrides=overrides or {})
    qtbot.addWidget(dlg)
    dlg.show()
    return dlg


def on_disk(data: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((data / "settings.json").read_text(encoding="utf-8"))
    return loaded


def click(qtbot: Any, dlg: SettingsDialog, which: QDialogButtonBox.StandardButton) -> None:
    qtbot.mouseClick(dlg.buttons.button(which), Qt.MouseButton.LeftButton)


def test_shows_the_current_settings_and_environment_overrides(
        qtbot: Any, data: Path, runner: OpRunner) -> None:
    dlg = make_dialog(qtbot, data, runner, overrides={"device": "RAGDESK_DEVICE=cuda"})
    assert dlg.data_dir.text() == str(data)
    assert dlg.theme.currentData() == "dark" and dlg.threads.value() == 2
    assert dlg.answer_spins["n_docs"].value() == 7
    assert dlg.answer_combos["mode"].currentData() == "sequence"
    assert dlg.answer_combos["mode"].currentText() == "RAG-Sequence"
    note = dlg.findChild(type(dlg.status), "note_device")
    assert note is not None and "RAGDESK_DEVICE=cuda" in note.text()
    assert dlg.threads.specialValueText() == "Automatic"


def test_the_choices_are_named_as_the_controls_name_them(
        qtbot: Any, data: Path, runner: OpRunner) -> None:
    """Mode, decoding and retriever: one name each, here and in the controls panel (the
    sparse retriever is BM25 in both)."""
    from ragdesk.core.options import AnswerOptions
    from ragdesk.ui.controls import ControlsPanel

    dlg = make_dialog(qtbot, data, runner)
    panel = ControlsPanel(AnswerOptions(), "starter")
    qtbot.addWidget(panel)

    def names(combo: Any) -> dict[str, str]:
        return {combo.itemData(i): combo.itemText(i) for i in range(combo.count())}

    for key, combo in (("mode", panel.mode), ("decoding", panel.decoding),
                       ("retriever", panel.retriever)):
        assert names(dlg.answer_combos[key]) == names(combo), key
    assert names(panel.retriever)["sparse"] == "BM25"


def test_invalid_values_are_shown_beside_their_fields_and_nothing_is_saved(
        qtbot: Any, data: Path, runner: OpRunner, tmp_path: Path) -> None:
    before = on_disk(data)
    dlg = make_dialog(qtbot, data, runner)
    a_file = tmp_path / "a-file"
    a_file.write_text("x", encoding="utf-8")
    dlg.data_dir.setText(str(a_file))
    dlg.device.setCurrentText("gpu")
    dlg.hf_cache.setText("relative/path")
    dlg.theme.setCurrentIndex(dlg.theme.findData("light"))
    with qtbot.waitSignal(dlg.checked, timeout=TIMEOUT_MS) as sig:
        click(qtbot, dlg, QDialogButtonBox.StandardButton.Ok)
    assert set(sig.args[0]) == {"data_dir", "device", "hf_cache"}
    assert dlg.isVisible()  # OK did not close it
    for field in ("data_dir", "device", "hf_cache"):
        assert dlg.errors[field].isVisible() and dlg.errors[field].text()
    assert not dlg.errors["threads"].isVisible()
    assert "is a file" in dlg.errors["data_dir"].text()
    assert on_disk(data) == before and not location_file().exists()

    dlg.device.setCurrentText("cpu")
    dlg.data_dir.setText(str(data))
    dlg.hf_cache.setText("")
    with qtbot.waitSignal(dlg.applied, timeout=TIMEOUT_MS) as applied:
        click(qtbot, dlg, QDialogButtonBox.StandardButton.Apply)
    assert applied.args[1] == [] and not dlg.errors["device"].isVisible()
    assert on_disk(data)["theme"] == "light"


def test_valid_changes_are_saved_and_restarts_named(
        qtbot: Any, data: Path, runner: OpRunner, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    threads_seen: list[bool] = []
    real_validate = preferences.validate

    def watched(prefs: Any) -> dict[str, str]:
        threads_seen.append(threading.current_thread() is threading.main_thread())
        return real_validate(prefs)

    monkeypatch.setattr(settings_dialog, "validate", watched)
    dlg = make_dialog(qtbot, data, runner)
    new_dir = tmp_path / "new-data"
    dlg.data_dir.setText(str(new_dir))
    dlg.device.setCurrentText("auto")
    dlg.threads.setValue(0)
    dlg.answer_spins["n_docs"].setValue(9)
    dlg.answer_combos["retriever"].setCurrentIndex(
        dlg.answer_combos["retriever"].findData("hybrid"))
    with qtbot.waitSignal(dlg.applied, timeout=TIMEOUT_MS) as applied:
        click(qtbot, dlg, QDialogButtonBox.StandardButton.Ok)
    new, restart = applied.args
    assert restart == ["data folder", "device"]
    assert new.answer["n_docs"] == 9 and new.threads == 0
    assert threads_seen == [False]  # the folder checks ran off the GUI thread
    saved = on_disk(data)
    assert saved["n_docs"] == 9 and saved["retriever"] == "hybrid"
    assert saved["device"] == "auto" and saved["threads"] == 0
    assert saved["mode"] == "sequence" and saved["theme"] == "dark"  # untouched
    assert location_file().read_text(encoding="utf-8").strip() == str(new_dir)
    assert resolve_data_dir() == new_dir  # what the next start opens
    assert "Restart ragdesk" in dlg.status.text()
    assert not dlg.isVisible()  # OK closed it after saving


def test_cancel_saves_nothing(qtbot: Any, data: Path, runner: OpRunner) -> None:
    before = on_disk(data)
    dlg = make_dialog(qtbot, data, runner)
    dlg.answer_spins["n_docs"].setValue(3)
    click(qtbot, dlg, QDialogButtonBox.StandardButton.Cancel)
    qtbot.waitUntil(lambda: not dlg.isVisible(), timeout=TIMEOUT_MS)
    assert on_disk(data) == before


def test_saving_keeps_every_note_whole(qtbot: Any, data: Path, runner: OpRunner) -> None:
    """Applying (the theme, say) shows "Saved." below the fields; the dialog grows for it
    rather than squeezing the wrapped notes above until their descenders are cut."""
    from PySide6.QtWidgets import QLabel

    dlg = make_dialog(qtbot, data, runner)
    qtbot.waitExposed(dlg)
    dlg.theme.setCurrentIndex(dlg.theme.findData("light"))
    with qtbot.waitSignal(dlg.applied, timeout=TIMEOUT_MS):
        dlg.buttons.button(QDialogButtonBox.StandardButton.Apply).click()
    assert dlg.status.isVisible() and dlg.status.text().startswith("Saved")
    settle(qtbot, dlg)
    wrapped = [lb for lb in dlg.findChildren(QLabel)
               if lb.isVisible() and lb.wordWrap() and lb.text()]
    assert any(lb.objectName() == "note_data_dir" for lb in wrapped)
    for label in wrapped:
        assert label.height() >= label.heightForWidth(label.width()), label.objectName()
