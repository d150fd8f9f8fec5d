"""A folder of documents through the window, offscreen, with the real core and tiny models:
imported from the index manager (a damaged PDF named, the rest imported), asked with BM25
(the tiny encoder is random), and the answer's citation names the PDF's page and opens the
file there; re-importing the folder picks up the edited file only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QDialogButtonBox

from ragdesk.core.options import AnswerOptions
from ragdesk.ui.chat.card import AnswerCard
from ragdesk.ui.infos import DOCUMENTS_FILE
from ragdesk.ui.ops import Lane
from tests.documents.conftest import QUESTION, make_folder
from tests.ui.probes import JOB_TIMEOUT_MS, action, ask, no_error

PDF_TITLE = "Wildlife Report 2026"


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    root = make_folder(tmp_path / "my docs")
    good = (root / "report.pdf").read_bytes()
    (root / "broken.pdf").write_bytes(good[: len(good) // 3])  # a truncated download
    return root


def import_through_manager(qtbot: Any, w: Any, folder: Path, name: str = "docs") -> Any:
    action(w, "manage").trigger()
    m = w.index_manager
    dlg = m.open_import()
    dlg.format.setCurrentIndex(dlg.format.findData("docs"))
    assert not dlg.limit.isEnabled()
    dlg.source.setText(str(folder))
    assert dlg.name.text() == "my-docs"  # from the folder's name
    dlg.name.setText(name)
    # The packs are listed as the window opens, under load after the dialog did: without the
    # pack's encoder, Import would refuse.
    qtbot.waitUntil(lambda: dlg.encoder_ref() != "", timeout=30_000)
    with qtbot.waitSignal(w.ops.events(Lane.JOBS).finished, timeout=JOB_TIMEOUT_MS):
        qtbot.mouseClick(dlg.buttons.button(QDialogButtonBox.StandardButton.Ok),
                         Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: any(s.name == name and s.ready and s.documents
                                for s in m.snapshots), timeout=30_000)
    return m


def test_the_documents_record_is_the_cores() -> None:
    from ragdesk.core.documents import DOCUMENTS_FILE as CORE_FILE

    assert DOCUMENTS_FILE == CORE_FILE


def test_a_folder_imports_and_its_pdf_citation_opens_at_the_page(  # type: ignore[no-untyped-def]
        qtbot, window, folder, monkeypatch) -> None:
    w = window
    m = import_through_manager(qtbot, w, folder)
    text = m.message.text()
    assert "Imported “docs”" in text and "4 added" in text
    assert "broken.pdf" in text  # the damaged file, by name; the rest imported
    assert no_error(w)

    # The folder snapshot answers, with BM25: the tiny dense encoder is random.
    m.select("docs")
    m.switch_selected()
    assert w.state.active_snapshot == "docs"
    w.controls.retriever.setCurrentIndex(w.controls.retriever.findData("sparse"))
    answer = ask(qtbot, w, QUESTION)
    assert answer.snapshot == "docs"
    k = next(i for i, d in enumerate(answer.docs) if d.title == PDF_TITLE)
    assert "quokka festival" in answer.docs[k].text
    card = w.chat.cards[-1]
    chip = card.chip(k)
    qtbot.waitUntil(lambda: chip.place is not None, timeout=30_000)  # read on the reads lane
    assert chip.full_text().startswith(f"[{k + 1}]  {PDF_TITLE} · p. 2")
    assert "report.pdf · p. 2" in chip.toolTip()

    opened: list[str] = []

    def open_url(url: QUrl) -> bool:
        opened.append(bytes(url.toEncoded().data()).decode())
        return True

    monkeypatch.setattr(QDesktopServices, "openUrl", staticmethod(open_url))
    qtbot.mouseClick(chip, Qt.MouseButton.LeftButton)
    ins = w.inspector
    assert ins.k == k
    assert ins.place_label.isVisible() and ins.place_label.text() == "report.pdf · p. 2"
    assert ins.open_button.isVisible()
    qtbot.mouseClick(ins.open_button, Qt.MouseButton.LeftButton)
    want = (folder / "report.pdf").resolve().as_uri() + "#page=2"
    assert opened == [want]
    assert "%20" in want  # the folder's name has a space: the URI is quoted
    chip.actions()[0].trigger()  # the chip's context menu opens it too
    assert opened == [want, want]

    # A card made already answered (a reopened conversation) gets its places too.
    again = AnswerCard(-1, QUESTION, AnswerOptions(), "docs")
    qtbot.addWidget(again)
    again.finish(answer)
    w.citations.watch(again)
    qtbot.waitUntil(lambda: again.chip(k).place is not None, timeout=30_000)
    place = again.chip(k).place
    assert place is not None and place.uri == want


def test_reimport_picks_up_the_edited_file(qtbot, window, folder) -> None:  # type: ignore[no-untyped-def]
    w = window
    m = import_through_manager(qtbot, w, folder)
    m.select("docs")
    assert m.reimport_button.isEnabled()
    guide = folder / "guide.md"
    guide.write_text(guide.read_text(encoding="utf-8") + "\n## Update\n\nNew words.\n",
                     encoding="utf-8")
    (folder / "page.html").unlink()
    dlg = m.open_reimport()
    assert dlg is not None and dlg.source.text() == str(folder.resolve())
    assert dlg.name.text() == "docs" and dlg.name.isReadOnly()
    assert dlg.format.currentData() == "docs" and dlg.validate() is None
    with qtbot.waitSignal(w.ops.events(Lane.JOBS).finished, timeout=JOB_TIMEOUT_MS):
        qtbot.mouseClick(dlg.buttons.button(QDialogButtonBox.StandardButton.Ok),
                         Qt.MouseButton.LeftButton)
    text = m.message.text()
    assert "1 changed" in text and "1 removed" in text and "2 unchanged" in text, text


def test_a_folder_import_is_cancelled_from_the_job_panel(  # type: ignore[no-untyped-def]
        qtbot, window, tmp_path, tiny_models) -> None:
    w = window
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(150):  # read one by one: the cancel lands between two files
        (folder / f"note-{i:02d}.md").write_text(f"# Note {i}\n\nText of note {i}.\n",
                                                 encoding="utf-8")
    m = w.open_index_manager()
    jobs = w.ops.events(Lane.JOBS)
    jobs.progressed.connect(lambda _op, _u: m.job_panel.cancel_button.click())
    with qtbot.waitSignal(jobs.failed, timeout=JOB_TIMEOUT_MS) as sig:
        w.library.start_folder_import(str(folder), name="many",
                                      encoder=str(tiny_models.ctx_encoder),
                                      on_failure=m._failed("Importing many"))
    assert sig.args[1].cancelled
    assert no_error(w)  # a cancel is not an error dialog
    assert m.message.text() == "Importing many: cancelled."
    rec = w.backend.catalog.find_snapshot("many")
    assert rec is None or rec.state != "ready"


def test_a_wikipedia_snapshots_citations_get_no_place(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    answer = ask(qtbot, window, "who wrote the origin of species?")
    assert answer.docs
    found = window.backend.citation_places(answer.docs)
    assert found == {}
    assert not window.inspector.place_label.isVisible()
    assert window.inspector.place() is None
