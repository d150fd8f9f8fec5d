"""`ragdesk index import FOLDER --format docs`: passages with their page or heading, citations
back to the PDF page, incremental re-import, damaged files reported by name, resume."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.documents.conftest import QUESTION
from tests.documents.makers import words

Cli = Callable[..., tuple[int, str, str]]


def _import(cli: Cli, folder: Path, enc: Any, name: str = "docs") -> dict[str, Any]:
    code, out, err = cli("index", "import", str(folder), "--format", "docs", "--name", name,
                         "--encoder", str(enc), "--json")
    assert code == 0, err
    return dict(json.loads(out))


def _snapshot_folder(data_dir: Path, name: str = "docs") -> Path:
    from ragdesk.core.app import AppContext

    app = AppContext(data_dir)
    try:
        return app.data.snapshot_dir(app.catalog.get_snapshot(name).slug)
    finally:
        app.close()


def _files(data_dir: Path) -> dict[str, Any]:
    from ragdesk.core.documents import read_folder_record

    record = read_folder_record(_snapshot_folder(data_dir))
    assert record is not None
    return dict(record.files)


def test_folder_import_cites_the_pdf_page(cli: Cli, tiny_models: Any, docs_folder: Path,
                                          data_dir: Path) -> None:
    res = _import(cli, docs_folder, tiny_models.ctx_encoder)
    assert sorted(res["added"]) == ["guide.md", "notes.docx", "page.html", "report.pdf"]
    assert res["warnings"] == [] and res["other_files"] == 1  # image.png
    assert res["encoded"] == res["passages"] and res["snapshot"]["state"] == "ready"
    files = _files(data_dir)
    assert files["report.pdf"].title == "Wildlife Report 2026"
    assert files["notes.docx"].title == "Team Notes" and files["guide.md"].title == "Setup Guide"
    assert files["page.html"].title == "Recipes"

    from ragdesk import load_engine
    from ragdesk.core.documents import citation_uri, citation_uris, locate

    engine = load_engine(question_encoder=str(tiny_models.question_encoder),
                         generator=str(tiny_models.bart), data_dir=data_dir)
    try:
        # The tiny generator is random, so the question is answered by retrieval: BM25 finds
        # the one passage that shares its words.
        ans = engine.answer(QUESTION, n_docs=2, retriever="sparse", max_new_tokens=4)
        top = ans.docs[0]
        assert "quokka festival" in top.text and top.title == "Wildlife Report 2026"
        where = locate(engine.snapshot_index(), [d.id for d in ans.docs])[top.id]
        uris = citation_uris(engine.snapshot_index(), [top.id])
    finally:
        engine.close()
    assert where.path == "report.pdf" and where.page == 2  # PDF_FACT is on page 2
    assert citation_uri(docs_folder, where) == (docs_folder / "report.pdf").as_uri() + "#page=2"
    assert uris == {top.id: (docs_folder / "report.pdf").as_uri() + "#page=2"}


def test_passages_keep_headings(tiny_models: Any, docs_folder: Path, data_dir: Path,
                                cli: Cli) -> None:
    _import(cli, docs_folder, tiny_models.ctx_encoder)
    from ragdesk.core.documents import locate_in_folder

    folder = _snapshot_folder(data_dir)
    files = _files(data_dir)
    html = files["page.html"]
    locs = locate_in_folder(folder, list(range(html.start, html.start + html.count)))
    assert [(loc.heading, loc.anchor) for loc in locs.values()] == [("Bread", "bread"),
                                                                   ("Soup", "soup")]
    docx = files["notes.docx"]
    headings = {loc.heading for loc in locate_in_folder(
        folder, list(range(docx.start, docx.start + docx.count))).values()}
    assert headings == {"Meetings", "Hiring"}


def test_reimport_encodes_only_the_changed_file(cli: Cli, tiny_models: Any, docs_folder: Path,
                                                data_dir: Path) -> None:
    _import(cli, docs_folder, tiny_models.ctx_encoder)
    before = _files(data_dir)
    old = np.load(_snapshot_folder(data_dir) / "embeddings.npy").copy()

    guide = docs_folder / "guide.md"
    guide.write_text(guide.read_text(encoding="utf-8") + f"\n## Update\n\n{words('new', 60)}\n",
                     encoding="utf-8")
    res = _import(cli, docs_folder, tiny_models.ctx_encoder)
    after = _files(data_dir)
    assert res["changed"] == ["guide.md"] and res["added"] == [] and res["removed"] == []
    assert sorted(res["unchanged"]) == ["notes.docx", "page.html", "report.pdf"]
    # Exactly the edited file's passages were encoded; the rest kept their vectors.
    assert res["encoded"] == after["guide.md"].count > before["guide.md"].count
    assert res["reused"] == sum(f.count for k, f in before.items() if k != "guide.md")
    new = np.load(_snapshot_folder(data_dir) / "embeddings.npy")
    for rel in ("notes.docx", "page.html", "report.pdf"):
        b, a = before[rel], after[rel]
        np.testing.assert_array_equal(new[a.start:a.start + a.count],
                                      old[b.start:b.start + b.count])

    code, _, err = cli("index", "verify", "docs")
    assert code == 0, err  # the swapped-in version's checksums hold

    res = _import(cli, docs_folder, tiny_models.ctx_encoder)  # nothing changed: nothing done
    assert res["encoded"] == 0 and res["changed"] == res["added"] == res["removed"] == []
    assert np.array_equal(np.load(_snapshot_folder(data_dir) / "embeddings.npy"), new)

    (docs_folder / "page.html").unlink()
    (docs_folder / "extra.txt").write_text("Plain notes about the garden.\n\nWater weekly.\n",
                                           encoding="utf-8")
    res = _import(cli, docs_folder, tiny_models.ctx_encoder)
    assert res["added"] == ["extra.txt"] and res["removed"] == ["page.html"]
    assert res["encoded"] == _files(data_dir)["extra.txt"].count
    assert res["passages"] == sum(f.count for f in _files(data_dir).values())
    code, out, _ = cli("index", "list", "--json")
    assert code == 0 and [s["passages"] for s in json.loads(out)] == [res["passages"]]


def test_damaged_pdf_is_named_and_the_rest_imports(cli: Cli, tiny_models: Any,
                                                   docs_folder: Path) -> None:
    good = (docs_folder / "report.pdf").read_bytes()
    (docs_folder / "broken.pdf").write_bytes(good[: len(good) // 3])  # a truncated download
    (docs_folder / "empty.md").write_text("", encoding="utf-8")
    code, out, err = cli("index", "import", str(docs_folder), "--format", "docs", "--name",
                         "docs", "--encoder", str(tiny_models.ctx_encoder))
    assert code == 0, err
    assert "warning: skipped broken.pdf: is not a readable PDF" in err
    assert "warning: skipped empty.md: holds no text" in err
    assert "2 file(s) could not be imported" in out and "4 added" in out


def test_interrupted_import_resumes_without_reencoding(tiny_models: Any, docs_folder: Path,
                                                       data_dir: Path) -> None:
    from ragdesk.core.app import AppContext
    from ragdesk.core.documents import import_folder
    from ragdesk.core.errors import Cancelled
    from ragdesk.core.progress import CancelToken, ProgressUpdate

    app = AppContext(data_dir)
    try:
        token = CancelToken()

        def cancel_after_two_files(u: ProgressUpdate) -> None:
            if u.message.startswith("reading documents") and u.done >= 2:
                token.cancel()

        with pytest.raises(Cancelled):
            import_folder(app.data, app.catalog, docs_folder, name="docs",
                          encoder=str(tiny_models.ctx_encoder),
                          progress=cancel_after_two_files, cancel=token)
        assert app.catalog.get_snapshot("docs").state == "failed"
        res = import_folder(app.data, app.catalog, docs_folder, name="docs",
                            encoder=str(tiny_models.ctx_encoder))
        files = _files(data_dir)
        done_first = {"guide.md", "notes.docx"}  # sorted order: the first two files
        assert res.encoded == sum(f.count for k, f in files.items() if k not in done_first)
        assert res.reused == sum(files[k].count for k in done_first)
        assert res.record.state == "ready" and res.passages == sum(f.count for f in files.values())
    finally:
        app.close()


def test_a_folder_of_nothing_readable_is_refused(cli: Cli, tiny_models: Any,
                                                 tmp_path: Path) -> None:
    folder = tmp_path / "junk"
    folder.mkdir()
    (folder / "a.pdf").write_bytes(b"not a pdf at all")
    code, _, err = cli("index", "import", str(folder), "--format", "docs", "--name", "junk",
                       "--encoder", str(tiny_models.ctx_encoder))
    assert code == 2 and "holds no document ragdesk can read" in err and "a.pdf" in err


def test_import_snapshot_takes_a_folder(tiny_models: Any, docs_folder: Path,
                                        data_dir: Path) -> None:
    """The importer the GUI calls: a folder (or --format docs) goes to the document importer."""
    from ragdesk.core.app import AppContext
    from ragdesk.core.errors import BadInputError
    from ragdesk.core.snapshots import import_snapshot

    app = AppContext(data_dir)
    try:
        rec = import_snapshot(app.data, app.catalog, docs_folder, name="docs",
                              encoder=str(tiny_models.ctx_encoder))
        assert rec.state == "ready" and rec.passages == sum(
            f.count for f in _files(data_dir).values())
        with pytest.raises(BadInputError, match="do not apply"):
            import_snapshot(app.data, app.catalog, docs_folder, name="docs", fmt="docs",
                            encoder=str(tiny_models.ctx_encoder), limit=3)
    finally:
        app.close()


def test_without_an_encoder_the_starter_packs_is_used(tmp_path: Path, data_dir: Path) -> None:
    """A folder imported with no --encoder answers with the offline starter pack."""
    from ragdesk.core.app import AppContext
    from ragdesk.core.documents import import_folder
    from ragdesk.core.snapshots.starter import starter_encoder_path

    try:
        starter_encoder_path()
    except Exception as exc:  # not installed: nothing to test
        pytest.skip(str(exc))
    folder = tmp_path / "one"
    folder.mkdir()
    (folder / "a.md").write_text("# Title\n\nSome words about gardens.\n", encoding="utf-8")
    app = AppContext(data_dir)
    try:
        res = import_folder(app.data, app.catalog, folder, name="mine", encoder=None)
        assert res.record.default_pack == "starter" and res.record.dim == 384
    finally:
        app.close()


def _fail_writing(monkeypatch: pytest.MonkeyPatch, err: int) -> None:
    import os

    from ragdesk.core.documents import importer

    def fails(*a: Any, **k: Any) -> None:
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(importer, "write_snapshot", fails)


def test_a_full_disk_keeps_the_work_and_says_what_to_do(
        tiny_models: Any, docs_folder: Path, data_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same rule as any import: a full disk is resumable, and the message says how."""
    import errno

    from ragdesk.core.app import AppContext
    from ragdesk.core.documents import import_folder, swap

    app = AppContext(data_dir)
    try:
        _fail_writing(monkeypatch, errno.ENOSPC)
        with pytest.raises(OSError):
            import_folder(app.data, app.catalog, docs_folder, name="docs",
                          encoder=str(tiny_models.ctx_encoder))
        rec = app.catalog.get_snapshot("docs")
        assert rec.state == "failed"
        assert "Free some space and import the folder again to resume." in (rec.error or "")
        assert [j.state for j in app.catalog.list_jobs()] == ["failed"]
        assert swap.work_dir(app.data, rec.slug).is_dir()  # every file's vectors are kept
        monkeypatch.undo()
        res = import_folder(app.data, app.catalog, docs_folder, name="docs",
                            encoder=str(tiny_models.ctx_encoder))
        assert res.record.state == "ready" and res.encoded == 0
        assert res.reused == res.passages
    finally:
        app.close()


def test_an_error_that_is_not_resumable_discards_the_work(
        tiny_models: Any, docs_folder: Path, data_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Not every OSError is resumable: one that may have left the work half-written (an I/O
    error) removes it, as the passage-source importer does, and the next run starts afresh."""
    import errno

    from ragdesk.core.app import AppContext
    from ragdesk.core.documents import import_folder, swap

    app = AppContext(data_dir)
    try:
        _fail_writing(monkeypatch, errno.EIO)
        with pytest.raises(OSError):
            import_folder(app.data, app.catalog, docs_folder, name="docs",
                          encoder=str(tiny_models.ctx_encoder))
        rec = app.catalog.get_snapshot("docs")
        assert rec.state == "failed" and "Input/output error" in (rec.error or "")
        assert "to resume" not in (rec.error or "")
        assert not swap.work_dir(app.data, rec.slug).exists()
        monkeypatch.undo()
        res = import_folder(app.data, app.catalog, docs_folder, name="docs",
                            encoder=str(tiny_models.ctx_encoder))
        assert res.record.state == "ready" and res.encoded == res.passages
    finally:
        app.close()
