"""``index import DIR --format docs`` read what the folder only pointed at.

Links to the password file, to the process's own environment in procfs and to a file beside
the folder became passages (exit 0); a file name with invalid UTF-8 failed the whole import
(exit 70). Links leading out of the folder, dangling links and loops are now refused by name
as warnings, names that are not UTF-8 are skipped with their bytes shown escaped, and the
rest of the folder imports.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX links and byte names")

BESIDE = "The beside-the-folder sentinel zebracorn must never be imported."


def _folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "good.md").write_text("# Good\n\nThe lighthouse keeper feeds the gulls daily.\n",
                                  encoding="utf-8")
    (root / "sub" / "inner.txt").write_text("An inner note about the tides.\n",
                                             encoding="utf-8")
    (tmp_path / "beside.txt").write_text(BESIDE + "\n", encoding="utf-8")
    return root


def _import(cli, folder: Path, enc: Any) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    code, out, err = cli("index", "import", str(folder), "--format", "docs", "--name", "docs",
                         "--encoder", str(enc), "--json")
    assert code == 0, (out, err)
    assert "internal error" not in err
    return dict(json.loads(out))


def _passage_text(data_dir: Path) -> str:
    dbs = list((data_dir / "snapshots").rglob("passages.sqlite"))
    assert len(dbs) == 1
    con = sqlite3.connect(dbs[0])
    try:
        return "\n".join(t + " " + x for t, x in con.execute("SELECT title, text FROM passages"))
    finally:
        con.close()


def test_links_out_of_the_folder_are_refused_by_name(cli, tiny_models, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                     data_dir: Path) -> None:
    root = _folder(tmp_path)
    os.symlink("/etc/passwd", root / "passwd.txt")
    os.symlink("/proc/self/environ", root / "environ.txt")
    os.symlink(tmp_path / "beside.txt", root / "beside.txt")
    os.symlink("../beside.txt", root / "sub" / "relative.md")
    os.symlink(tmp_path / "gone.txt", root / "dangling.txt")
    os.symlink("loop.txt", root / "loop.txt")
    os.symlink(tmp_path, root / "outdir")  # a folder link out: its files must not come in
    os.symlink("good.md", root / "alias.md")  # inside the folder: fine
    res = _import(cli, root, tiny_models.st_encoder)
    warnings = "\n".join(res["warnings"])
    out = "outside the folder"
    for name, why in [("passwd.txt", out), ("environ.txt", out), ("beside.txt", out),
                      ("sub/relative.md", out), ("outdir", out),
                      ("dangling.txt", "does not exist"), ("loop.txt", "loops back")]:
        assert f"{name}: is a symbolic link" in warnings and why in warnings, (name, warnings)
    assert sorted(res["added"]) == ["alias.md", "good.md", "sub/inner.txt"]
    text = _passage_text(data_dir)
    assert "lighthouse keeper" in text and "tides" in text
    assert "zebracorn" not in text and "root:" not in text
    assert os.environ.get("PATH", "/nonexistent-path") not in text


@pytest.mark.skipif(sys.platform == "darwin", reason="APFS refuses names that are not UTF-8")
def test_a_name_that_is_not_utf8_is_skipped_by_name(cli, tiny_models, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                    data_dir: Path) -> None:
    root = _folder(tmp_path)
    bad = os.fsencode(root) + b"/caf\xe9 notes.txt"
    with open(bad, "wb") as fh:
        fh.write(b"Latin-1 named notes about the harbour.\n")
    os.mkdir(os.fsencode(root) + b"/d\xff")
    with open(os.fsencode(root) + b"/d\xff/x.txt", "wb") as fh:
        fh.write(b"a file in a folder named with a stray byte\n")
    res = _import(cli, root, tiny_models.st_encoder)
    warnings = "\n".join(res["warnings"])
    assert "caf\\xe9 notes.txt: its name is not valid UTF-8" in warnings, warnings
    assert "d\\xff: its name is not valid UTF-8" in warnings, warnings
    assert sorted(res["added"]) == ["good.md", "sub/inner.txt"]
    json.dumps(res, ensure_ascii=False).encode("utf-8")  # every name in the report is text


def test_the_human_report_names_the_refused_links(cli, tiny_models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = _folder(tmp_path)
    os.symlink("/etc/passwd", root / "passwd.txt")
    code, _, err = cli("index", "import", str(root), "--format", "docs", "--name", "docs",
                       "--encoder", str(tiny_models.st_encoder))
    assert code == 0, err
    assert "warning: skipped passwd.txt: is a symbolic link to /etc/passwd" in err
