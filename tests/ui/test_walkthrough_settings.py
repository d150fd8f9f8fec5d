"""Seen in the walk-through's dark-theme Settings at 1280x720 and 1440x900: the fields of
"Default answer options" started about 20 px to the right of those above them, each form's
label column sized to its own longest label."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QWidget

from ragdesk.core.paths import ENV_VAR
from ragdesk.core.settings import Settings
from ragdesk.ui.background import op_background
from ragdesk.ui.ops import OpRunner
from ragdesk.ui.settings_dialog import SettingsDialog


@pytest.fixture(autouse=True)
def own_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv(ENV_VAR, raising=False)


def _left(widget: QWidget, dialog: QWidget) -> int:
    return widget.mapTo(dialog, QPoint(0, 0)).x()


@pytest.mark.parametrize("env", [False, True])
def test_the_settings_fields_line_up_in_one_column(qtbot: Any, qapp: Any, tmp_path: Path,
                                                    env: bool) -> None:
    data = tmp_path / "data"
    data.mkdir()
    Settings(data / "settings.json").update({"theme": "dark"})
    runner = OpRunner()
    try:
        # With RAGDESK_DATA_DIR set (the walk-through's case), a note sits under the folder.
        overrides = {"data_dir": f"{ENV_VAR}={data}"} if env else {}
        dialog = SettingsDialog(Settings(data / "settings.json"), data,
                                op_background(runner), overrides=overrides)
        qtbot.addWidget(dialog)
        dialog.show()
        qtbot.waitExposed(dialog)
        fields: list[QWidget] = [dialog.data_dir, dialog.device, dialog.threads,
                                 dialog.hf_cache, dialog.theme,
                                 *dialog.answer_combos.values(),
                                 *dialog.answer_spins.values()]
        lefts = {_left(f, dialog) for f in fields}
        assert len(lefts) == 1, sorted(lefts)
    finally:
        assert runner.shutdown(5_000)
        runner.deleteLater()
