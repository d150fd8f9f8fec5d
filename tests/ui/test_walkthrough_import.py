"""Seen in the walk-through's Index manager ▸ Import… with "Folder of documents" chosen:
the name box suggested "e.g. wiki-2018", and the source box of the file formats named no
Parquet file although the format list offers one."""

from __future__ import annotations

import re
from typing import Any

from ragdesk.ui.import_dialog import ImportDialog
from ragdesk.ui.infos import IMPORT_FORMATS


def _dialog(qtbot: Any) -> ImportDialog:
    dialog = ImportDialog(None, taken=[], encoders=[], default_encoder=None)
    qtbot.addWidget(dialog)
    return dialog


def test_a_folder_import_suggests_a_documents_name(qtbot: Any) -> None:
    dialog = _dialog(qtbot)
    dialog.format.setCurrentIndex(dialog.format.findData("docs"))
    assert "wiki" not in dialog.name.placeholderText().lower()
    assert "folder" in dialog.source.placeholderText().lower()
    # Back to a dump: the Wikipedia example returns.
    dialog.format.setCurrentIndex(dialog.format.findData("jsonl"))
    assert "wiki" in dialog.name.placeholderText().lower()


def test_the_source_box_names_a_file_of_every_file_format(qtbot: Any) -> None:
    dialog = _dialog(qtbot)
    for key, description in IMPORT_FORMATS.items():
        patterns = re.findall(r"\*(\.[\w.]+)", description)
        if not patterns:  # the starter's articles and a folder: no file
            continue
        dialog.format.setCurrentIndex(dialog.format.findData(key))
        assert patterns[0] in dialog.source.placeholderText(), (key, patterns)
