"""A malformed ``modules.json`` in a sentence-transformers folder ended in an
AttributeError (exit 70); it must be a clear error naming the file, exit 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

BAD_MODULES = {
    "object": '{"0": {"type": "sentence_transformers.models.Transformer"}}',
    "numbers": "[1, 2]",
    "type-not-text": '[{"type": 5, "path": ""}]',
    "not-json": "[{",
    "deep": "[" * 50_000 + "]" * 50_000,
}


@pytest.mark.parametrize("kind", sorted(BAD_MODULES))
def test_malformed_modules_json_is_a_clear_error(cli, tiny_models, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                 kind: str) -> None:
    enc = tmp_path / "enc"
    shutil.copytree(tiny_models.st_encoder, enc)
    (enc / "modules.json").write_text(BAD_MODULES[kind], encoding="utf-8")
    src = tmp_path / "p.jsonl"
    src.write_text(json.dumps({"title": "t", "text": "some text"}) + "\n", encoding="utf-8")
    code, out, err = cli("index", "import", str(src), "--name", "x", "--encoder", str(enc))
    assert code == 2, (out, err)
    assert f"{enc / 'modules.json'}" in err, err
    assert "internal error" not in err
