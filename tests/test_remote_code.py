"""No model, tokenizer or config ever loads with remote code.

A model folder whose ``config.json`` / ``tokenizer_config.json`` has an ``auto_map`` pointing
at a ``.py`` file makes transformers ask "Do you wish to run the custom code? [y/N]" unless
``trust_remote_code`` is passed; answering y imports that file. Every loading path is run in
a subprocess with "y" on stdin, and the file would leave a marker behind if it ever ran.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "ragdesk"

# Answers every "[y/N]" prompt with yes (the prompt reads stdin even when it is no terminal).
YES = "y\n" * 20


def _from_pretrained_calls() -> list[tuple[Path, int, str, str | None]]:
    """(file, line, call, value of trust_remote_code) for every `.from_pretrained(` in ragdesk/."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "from_pretrained"):
                value = next((ast.unparse(k.value) for k in node.keywords
                              if k.arg == "trust_remote_code"), None)
                found.append((path.relative_to(REPO), node.lineno, ast.unparse(node.func),
                              value))
    return found


def test_every_from_pretrained_call_refuses_remote_code() -> None:
    calls = _from_pretrained_calls()
    assert len(calls) >= 10  # the scan finds the calls (encoders, RAG, GGUF, generators...)
    lacking = [f"{p}:{line} {call}(..., trust_remote_code={value})"
               for p, line, call, value in calls if value != "False"]
    assert lacking == [], "every from_pretrained call needs trust_remote_code=False:\n" + \
        "\n".join(lacking)


EVIL_CODE = """\
from pathlib import Path

Path({marker!r}).write_text("remote code ran")


class EvilConfig:
    pass


class EvilModel:
    pass


class EvilTokenizer:
    pass
"""


def _plant(folder: Path, marker: Path, *, config: bool = True) -> None:
    """Turn a saved model folder into one that asks to run ``evil.py``."""
    (folder / "evil.py").write_text(EVIL_CODE.format(marker=str(marker)), encoding="utf-8")
    tok_cfg_path = folder / "tokenizer_config.json"
    tok_cfg = json.loads(tok_cfg_path.read_text(encoding="utf-8"))
    # An unknown tokenizer class: transformers has no local code to fall back on, so it asks.
    tok_cfg["tokenizer_class"] = "EvilTokenizer"
    tok_cfg["auto_map"] = {"AutoTokenizer": ["evil.EvilTokenizer", "evil.EvilTokenizer"]}
    tok_cfg_path.write_text(json.dumps(tok_cfg), encoding="utf-8")
    if config and (folder / "config.json").exists():
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        cfg["model_type"] = "evil-model"  # unknown: the auto classes would need the remote one
        cfg["architectures"] = ["EvilModel"]
        cfg["auto_map"] = {"AutoConfig": "evil.EvilConfig", "AutoModel": "evil.EvilModel"}
        (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    # transformers copies remote code into this cache before importing it.
    env["HF_MODULES_CACHE"] = str(tmp / "hf-modules")
    env["HF_HUB_OFFLINE"] = "1"
    env["QT_QPA_PLATFORM"] = "offscreen"
    return env


def _run_python(code: str, *args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], input=YES, capture_output=True,
                          text=True, env=_env(tmp), timeout=300)


def _assert_not_ran(marker: Path, proc: subprocess.CompletedProcess[str]) -> None:
    assert not marker.exists(), (
        "the folder's remote code ran:\n" + proc.stdout[-2000:] + proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr or "RagdeskError" in proc.stderr, proc.stderr[-3000:]


LOAD_ENCODER = """
import sys
from ragdesk.core.encoders import load_encoder
from ragdesk.core.errors import RagdeskError
try:
    load_encoder(sys.argv[1], role=sys.argv[2])
except RagdeskError as exc:
    print("refused:", exc.message)
else:
    print("loaded")
"""


@pytest.mark.parametrize("role", ["question", "passage"])
def test_an_encoder_folder_never_runs_its_code(tiny_models: Any, tmp_path: Path,
                                               role: str) -> None:
    folder = tmp_path / "evil-encoder"
    shutil.copytree(tiny_models.st_encoder, folder)
    marker = tmp_path / f"ran-{role}"
    _plant(folder, marker)
    proc = _run_python(LOAD_ENCODER, str(folder), role, tmp=tmp_path)
    _assert_not_ran(marker, proc)
    assert "refused:" in proc.stdout, proc.stdout + proc.stderr[-3000:]


def test_an_encoder_tokenizer_alone_never_runs_its_code(tiny_models: Any,
                                                        tmp_path: Path) -> None:
    """A known model type with a hostile tokenizer: the model loads, the code still does not
    run."""
    folder = tmp_path / "evil-tokenizer"
    shutil.copytree(tiny_models.st_encoder, folder)
    marker = tmp_path / "ran"
    _plant(folder, marker, config=False)
    proc = _run_python(LOAD_ENCODER, str(folder), "question", tmp=tmp_path)
    _assert_not_ran(marker, proc)


LOAD_RAG_PART = """
import sys
from ragdesk.core.errors import RagdeskError
from ragdesk.core.models.rag_checkpoint import load_rag_part
try:
    load_rag_part(__import__("pathlib").Path(sys.argv[1]), sys.argv[2])
except RagdeskError as exc:
    print("refused:", exc.message)
else:
    print("loaded")
"""


@pytest.mark.parametrize(("part", "tok_dir"), [
    ("question_encoder", "question_encoder_tokenizer"),
    ("generator", "generator_tokenizer"),
])
def test_a_rag_checkpoint_tokenizer_never_runs_its_code(tiny_models: Any, tmp_path: Path,
                                                        part: str, tok_dir: str) -> None:
    folder = tmp_path / "evil-rag"
    shutil.copytree(tiny_models.rag_token, folder)
    marker = tmp_path / "ran"
    _plant(folder / tok_dir, marker)
    proc = _run_python(LOAD_RAG_PART, str(folder), part, tmp=tmp_path)
    _assert_not_ran(marker, proc)


def _cli(tmp: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ragdesk", "--data-dir", str(tmp / "data"),
                           *argv], input=YES, capture_output=True, text=True, env=_env(tmp),
                          timeout=300)


def test_models_import_never_runs_the_folder_code(tiny_models: Any, tmp_path: Path) -> None:
    folder = tmp_path / "evil-encoder"
    shutil.copytree(tiny_models.st_encoder, folder)
    marker = tmp_path / "ran"
    _plant(folder, marker)
    proc = _cli(tmp_path, "models", "import", str(folder), "--name", "evil",
                "--generator", str(tiny_models.bart))
    _assert_not_ran(marker, proc)
    assert proc.returncode not in (0, 70), proc.stdout + proc.stderr
    assert "internal error" not in proc.stderr


def test_index_import_never_runs_the_encoder_code(tiny_models: Any, tmp_path: Path) -> None:
    folder = tmp_path / "evil-encoder"
    shutil.copytree(tiny_models.st_encoder, folder)
    marker = tmp_path / "ran"
    _plant(folder, marker)
    src = tmp_path / "p.jsonl"
    src.write_text(json.dumps({"title": "A", "text": "some text here"}) + "\n",
                   encoding="utf-8")
    proc = _cli(tmp_path, "index", "import", str(src), "--name", "evil", "--encoder",
                str(folder))
    _assert_not_ran(marker, proc)
    assert proc.returncode not in (0, 70), proc.stdout + proc.stderr
