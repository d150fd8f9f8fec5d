"""Messages that told the user the wrong thing or nothing.

- ``index verify`` called an interrupted (resumable) import "damaged ... remove it";
- ``--data-dir ""`` silently used the default data directory;
- the unknown-retriever hint listed only "dense" (sparse and hybrid register lazily);
- two names made only of non-Latin letters both mapped to the folder ``snapshot``, so the
  second was refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ragdesk.core.errors import Cancelled
from ragdesk.core.progress import CancelToken, ProgressUpdate
from tests.core.snapshots.util import write_jsonl


def _verify_all(cli) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    code, out, err = cli("index", "list", "--json")
    assert code == 0, err
    snaps: list[dict[str, Any]] = json.loads(out)
    for s in snaps:
        assert s["state"] == "ready", s
        code, _, err = cli("index", "verify", s["name"])
        assert code == 0, err
    return snaps


def test_verify_calls_an_interrupted_import_resumable(cli, tiny_models, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                      data_dir: Path) -> None:
    from ragdesk.core.app import AppContext
    from ragdesk.core.snapshots import import_snapshot

    src = write_jsonl(tmp_path / "c.jsonl", list(tiny_models.corpus[:40]))
    token = CancelToken()

    def cancel_mid_encoding(u: ProgressUpdate) -> None:
        if u.message.startswith("encoding") and u.done >= 4:
            token.cancel()

    ctx = AppContext(data_dir)
    with pytest.raises(Cancelled):
        import_snapshot(ctx.data, ctx.catalog, src, name="half", encoder=tiny_models.ctx_encoder,
                        batch_size=2, progress=cancel_mid_encoding, cancel=token)
    ctx.close()

    code, out, err = cli("index", "verify", "half")
    assert code == 1, (out, err)
    assert "not finished" in err and "resume" in err
    assert "damaged" not in err and "Remove it" not in err
    assert f"ragdesk index import {src} --name half" in err  # the command to run again
    code, out, _ = cli("index", "verify", "half", "--json")
    assert code == 1 and json.loads(out)["problems"][0].startswith("not finished")

    code, _, err = cli("index", "import", str(src), "--name", "half", "--encoder",
                       str(tiny_models.ctx_encoder), "--batch-size", "2")
    assert code == 0, err
    assert [s["name"] for s in _verify_all(cli)] == ["half"]


def test_empty_data_dir_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    from ragdesk.cli.main import main

    # Where the platform default would be: nothing may be written there.
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("RAGDESK_DATA_DIR", raising=False)
    for value in ("", "  "):
        code = main(["--data-dir", value, "index", "list"])
        err = capsys.readouterr().err
        assert code == 2, err
        assert "--data-dir is empty" in err and "--data-dir DIR" in err
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "home").exists()


def test_unknown_retriever_hint_lists_every_retriever() -> None:
    # A fresh process: every built-in retriever is listed without any being used first.
    code = ("from ragdesk.core.retrieval import get_retriever\n"
            "from ragdesk.core.errors import BadInputError\n"
            "try:\n    get_retriever('bm42')\n"
            "except BadInputError as e:\n    print(e.message, '|', e.hint)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    assert "Unknown retriever 'bm42'" in out
    assert "Choose one of: dense, hybrid, sparse." in out


def test_names_in_non_latin_letters_get_folders_of_their_own(cli, tiny_models, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                             data_dir: Path) -> None:
    src = write_jsonl(tmp_path / "c.jsonl", list(tiny_models.corpus[:6]))
    names = ["Википедия", "維基百科", "ВИКИПЕДИЯ"]
    for name in names:
        code, out, err = cli("index", "import", str(src), "--name", name, "--encoder",
                             str(tiny_models.ctx_encoder))
        assert code == 0, (name, out, err)
    snaps = _verify_all(cli)
    assert sorted(s["name"] for s in snaps) == sorted(names)
    slugs = [s["slug"] for s in snaps]
    assert len(set(slugs)) == 3 and all(s.startswith("snapshot-") for s in slugs)
    assert sorted(p.name for p in (data_dir / "snapshots").iterdir()
                  if not p.name.startswith(".")) == sorted(slugs)
