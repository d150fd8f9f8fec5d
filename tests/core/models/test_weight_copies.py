"""The lean decoder's weight copies kept beside a converted model
(ragdesk/core/models/weight_copies.py): a second load maps the first one's copies and answers
exactly as it did; copies of other weights, damaged or misaligned files, and copies too large
to keep are made again; the file is safetensors with every tensor 64-byte aligned; weights
changed in place never read a stored copy."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ragdesk.core.engine.causal_decoder import LeanCausalDecoder
from ragdesk.core.engine.int4_kernels import int4_groups_available
from ragdesk.core.engine.int8_kernels import int8_rows_available
from ragdesk.core.engine.lean_parts import WeightCopies
from ragdesk.core.engine.rag_token import rag_token_generate
from ragdesk.core.models import gguf_files, weight_copies
from ragdesk.core.models.loading import load_generator
from ragdesk.core.models.mapped_weights import WEIGHTS_FILE
from ragdesk.core.types import Hit
from tests.core.models.test_lean_causal_lm import _fake_converted_gguf

QUESTION = "who wrote the first book"


def _hits(tiny_models: Any) -> list[Hit]:
    return [Hit(i, t, " ".join(x.split()[:40]), 10.0 - i)
            for i, (t, x) in enumerate(tiny_models.corpus[:3])]


def _decoder(gen: Any) -> LeanCausalDecoder:
    decoder = gen.lean_decoder
    assert isinstance(decoder, LeanCausalDecoder)
    return decoder


def _load(gguf: Path) -> Any:
    gen = load_generator(gguf, precision="bfloat16", answering=True)
    weight_copies.wait_for_writes()
    return gen


def test_a_second_load_maps_the_first_loads_copies_and_answers_the_same(
        tiny_models: Any, tmp_path: Path) -> None:
    gguf = _fake_converted_gguf(tiny_models, tmp_path)
    folder = gguf_files.cache_dir_for(gguf)
    first = _load(gguf)
    made = _decoder(first).copies
    assert made.missed > 0
    assert (folder / weight_copies.COPIES_FILE).is_file()
    # every layer's fused bfloat16 weights and the output layer, with their int8 rows
    names = set(made.made)
    assert {"lm_head.weight", "layers.0.qkv.weight", "layers.1.down.weight"} <= names
    assert ("lm_head.rows.q" in names) == int8_rows_available()
    # whether each weight is on a 4-bit grid (these random ones are not), so that the next
    # start does not look again
    assert ("layers.0.o.groups.on_grid" in names) == int4_groups_available()

    second = _load(gguf)
    taken = _decoder(second).copies
    assert taken.missed == 0
    assert set(taken.made) == names
    for name, t in taken.made.items():
        assert t.dtype == made.made[name].dtype and torch.equal(t, made.made[name]), name
        assert t.data_ptr() % weight_copies.ALIGN == 0, name
    a = rag_token_generate(first, QUESTION, _hits(tiny_models), max_new_tokens=6)
    b = rag_token_generate(second, QUESTION, _hits(tiny_models), max_new_tokens=6)
    assert a.token_ids and a.token_ids == b.token_ids
    assert a.logprob == b.logprob


def test_copies_of_other_weights_are_made_again_and_replaced(tiny_models: Any,
                                                             tmp_path: Path) -> None:
    gguf = _fake_converted_gguf(tiny_models, tmp_path)
    folder = gguf_files.cache_dir_for(gguf)
    _load(gguf)
    old = weight_copies.weights_stamp(folder)
    assert weight_copies.read_copies(folder, old) is not None
    st = (folder / WEIGHTS_FILE).stat()
    os.utime(folder / WEIGHTS_FILE, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    new = weight_copies.weights_stamp(folder)
    assert weight_copies.read_copies(folder, new) is None
    # copies of the version read before are not filed under the version there now
    assert not weight_copies.write_copies(folder, {"w": torch.ones(4)}, old)
    assert _decoder(_load(gguf)).copies.missed > 0
    assert weight_copies.read_copies(folder, new) is not None  # rewritten for these weights


def test_a_damaged_file_is_made_again(tiny_models: Any, tmp_path: Path,
                                      caplog: pytest.LogCaptureFixture) -> None:
    gguf = _fake_converted_gguf(tiny_models, tmp_path)
    folder = gguf_files.cache_dir_for(gguf)
    _load(gguf)
    path = folder / weight_copies.COPIES_FILE
    path.write_bytes(path.read_bytes()[:-100])
    stamp = weight_copies.weights_stamp(folder)
    with caplog.at_level(logging.WARNING):
        assert weight_copies.read_copies(folder, stamp) is None
    assert "cannot be read" in caplog.text
    gen = _load(gguf)
    assert _decoder(gen).copies.missed > 0
    assert weight_copies.read_copies(folder, stamp) is not None


def test_a_file_whose_tensors_are_not_aligned_is_not_used(tmp_path: Path) -> None:
    (tmp_path / WEIGHTS_FILE).write_bytes(b"weights")
    stamp = weight_copies.weights_stamp(tmp_path)
    path = tmp_path / weight_copies.COPIES_FILE
    for n in range(1, 65):  # safetensors' own writer aligns to 8 bytes; find a name at 8
        save_file({"x" * n: torch.ones(64, dtype=torch.int8)}, str(path), metadata=stamp)
        with safe_open(str(path), "pt") as fh:
            if fh.get_tensor("x" * n).data_ptr() % weight_copies.ALIGN:
                break
    else:
        pytest.fail("no misaligned layout found")
    assert weight_copies.read_copies(tmp_path, stamp) is None


def test_the_file_is_safetensors_with_every_tensor_aligned(tmp_path: Path) -> None:
    (tmp_path / WEIGHTS_FILE).write_bytes(b"weights")
    g = torch.Generator().manual_seed(0)
    copies = {"a.q": torch.randint(-127, 128, (3, 5), dtype=torch.int8, generator=g),
              "a.scales": torch.rand(3, generator=g).to(torch.bfloat16),
              "b.weight": torch.randn(7, 9, generator=g).to(torch.bfloat16),
              "c.bias": torch.randn(11, generator=g),
              "d.empty": torch.empty(0, 4, dtype=torch.bfloat16)}
    stamp = weight_copies.weights_stamp(tmp_path)
    assert weight_copies.write_copies(tmp_path, copies, stamp)
    got = weight_copies.read_copies(tmp_path, stamp)
    assert got is not None and set(got) == set(copies)
    for name, t in copies.items():
        assert got[name].dtype == t.dtype and torch.equal(got[name], t), name
        assert got[name].data_ptr() % weight_copies.ALIGN == 0 or not t.numel(), name
    with safe_open(str(tmp_path / weight_copies.COPIES_FILE), "pt") as fh:
        assert fh.metadata() == stamp
    # nothing else left beside them (the temporary file was renamed)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [WEIGHTS_FILE, weight_copies.COPIES_FILE])


def test_copies_too_large_or_unwritable_are_not_kept(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / WEIGHTS_FILE).write_bytes(b"weights")
    stamp = weight_copies.weights_stamp(tmp_path)
    copies = {"w": torch.ones(64, 64, dtype=torch.bfloat16)}
    with monkeypatch.context() as m:
        m.setattr(weight_copies, "MAX_BYTES", 64 * 64 * 2 - 1)
        assert not weight_copies.write_copies(tmp_path, copies, stamp)
    with monkeypatch.context() as m:  # the disk would be left nearly full
        m.setattr(shutil, "disk_usage",
                  lambda _: shutil._ntuple_diskusage(10**12, 10**12 - 10**6, 10**6))
        assert not weight_copies.write_copies(tmp_path, copies, stamp)

    def full(*_: object) -> None:  # the disk fills up during the write
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(weight_copies, "_write", full)
    assert not weight_copies.write_copies(tmp_path, copies, stamp)
    assert sorted(p.name for p in tmp_path.iterdir()) == [WEIGHTS_FILE]


def test_a_failing_write_on_its_thread_is_logged_not_raised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / WEIGHTS_FILE).write_bytes(b"weights")

    def broken(*_: object) -> None:
        raise ValueError("a tensor that cannot be written")

    monkeypatch.setattr(weight_copies, "_layout", broken)
    with caplog.at_level(logging.WARNING):
        weight_copies.keep_copies(tmp_path, {"w": torch.ones(4)},
                                  weight_copies.weights_stamp(tmp_path))
        weight_copies.wait_for_writes()
    assert "Could not store the weight copies" in caplog.text
    assert not weight_copies._writing


def test_a_killed_writers_temporary_file_is_removed(tmp_path: Path) -> None:
    (tmp_path / WEIGHTS_FILE).write_bytes(b"weights")
    left = tmp_path / f".{weight_copies.COPIES_FILE}.tmp-4242-1-0"
    left.write_bytes(b"half of it")
    fresh = tmp_path / f".{weight_copies.COPIES_FILE}.tmp-4243-1-0"
    fresh.write_bytes(b"a live writer's")
    old = left.stat().st_mtime - 2 * 3600
    os.utime(left, (old, old))
    assert weight_copies.read_copies(tmp_path, weight_copies.weights_stamp(tmp_path)) is None
    assert not left.exists() and fresh.exists()


def test_a_stored_copy_of_another_shape_or_type_is_made_anew() -> None:
    w = torch.randn(6, 4)
    good = w.to(torch.bfloat16)
    store = WeightCopies({"a.weight": good, "b.weight": torch.zeros(5, 4, dtype=torch.bfloat16),
                          "c.weight": w})
    got = store.scope("a").take({"weight": ((6, 4), torch.bfloat16)},
                                lambda: pytest.fail("stored and as wanted: taken"))
    assert got["weight"] is good and store.missed == 0
    for name in ("b", "c", "d"):
        made = store.scope(name).take({"weight": ((6, 4), torch.bfloat16)},
                                      lambda: {"weight": w.to(torch.bfloat16)})
        assert torch.equal(made["weight"], good)
    assert store.missed == 3
    assert set(store.made) == {"a.weight", "b.weight", "c.weight", "d.weight"}


def test_weights_changed_in_place_never_read_a_stored_copy(tiny_models: Any,
                                                           tmp_path: Path) -> None:
    gguf = _fake_converted_gguf(tiny_models, tmp_path)
    _load(gguf)
    gen = _load(gguf)
    decoder = _decoder(gen)
    assert decoder.copies.missed == 0
    head = gen.model.lm_head.weight
    with torch.no_grad():
        head.mul_(2.0)
    decoder._follow_weights()
    assert decoder.copies.missed > 0
    assert decoder.lm_head.weight is not None
    assert torch.equal(decoder.lm_head.weight, head.to(torch.bfloat16))


def test_the_command_line_finishes_the_write_before_it_ends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ragdesk ask` ends its process at once after the answer (ragdesk.cli.main.run): the
    weight copies still being written must be complete first."""
    from ragdesk.cli import main as cli_main

    (tmp_path / WEIGHTS_FILE).write_bytes(b"weights")
    real = weight_copies.write_copies
    ended: list[bool] = []

    def slow(*args: Any) -> bool:
        time.sleep(0.5)
        return real(*args)

    def command() -> int:
        weight_copies.keep_copies(tmp_path, {"w": torch.ones(4)},
                                  weight_copies.weights_stamp(tmp_path))
        return 0

    def end(code: int) -> None:
        ended.append((tmp_path / weight_copies.COPIES_FILE).is_file())
        raise SystemExit(code)

    monkeypatch.setattr(weight_copies, "write_copies", slow)
    monkeypatch.setattr(cli_main, "main", command)
    monkeypatch.setattr(os, "_exit", end)
    with pytest.raises(SystemExit) as exc:
        cli_main.run()
    assert exc.value.code == 0
    # the process ended at once (os._exit) or by a normal exit, either way after the write
    assert ended in ([True], [])
    assert (tmp_path / weight_copies.COPIES_FILE).is_file()


@pytest.mark.parametrize("room", ["dims", "dims and int8 rows"])
def test_copies_too_large_to_keep_whole_keep_the_kinds_that_fit(
        tiny_models: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, room: str) -> None:
    """A pack whose copies exceed the limit (the reader's) keeps whole kinds while they fit:
    the output layer's large input dims first (found by running the model), then the int8
    rows. The next start takes those without running the model or quantizing again, makes
    the rest, and does not rewrite the file."""
    from ragdesk.core.engine import lean_parts
    from ragdesk.core.engine.int8_kernels import int8_head_available

    if not int8_head_available():
        pytest.skip("no int8 x int8 kernel on this CPU: no output-layer dims to keep")
    gguf = _fake_converted_gguf(tiny_models, tmp_path)
    folder = gguf_files.cache_dir_for(gguf)
    runs: list[str] = []
    large_dims = LeanCausalDecoder._large_dims
    quantize = lean_parts.quantize_rows  # type: ignore[attr-defined]  # what Linear calls

    def counted_dims(self: LeanCausalDecoder, n: int) -> torch.Tensor:
        runs.append("dims")
        return large_dims(self, n)

    def counted_quantize(weight: torch.Tensor) -> dict[str, torch.Tensor]:
        runs.append("quantize")
        return quantize(weight)

    monkeypatch.setattr(LeanCausalDecoder, "_large_dims", counted_dims)
    monkeypatch.setattr(lean_parts, "quantize_rows", counted_quantize)
    first = _load(gguf)
    made = _decoder(first).copies.made
    kinds = {order: sum(int(t.numel()) * t.element_size() for n, t in made.items()
                        if lean_parts.keeping_order(n) == order) for order in (0, 1, 2)}
    fits = kinds[0] if room == "dims" else kinds[0] + kinds[1]
    # the limit lowered to what this room holds, the first load run again under it
    monkeypatch.setattr(weight_copies, "MAX_BYTES", fits)
    (folder / weight_copies.COPIES_FILE).unlink()
    runs.clear()
    first = _load(gguf)
    made = _decoder(first).copies.made
    path = folder / weight_copies.COPIES_FILE
    with safe_open(str(path), "pt") as fh:
        kept = {k for k in fh.keys() if not k.startswith("__pad__")}  # noqa: SIM118
    wanted = {n for n in made if lean_parts.keeping_order(n) <= (0 if room == "dims" else 1)}
    assert kept == wanted and "lm_head.head.dims" in kept
    assert ("layers.0.qkv.rows.q" in kept) == (room != "dims")
    assert runs.count("dims") == 1
    quantized = runs.count("quantize")
    assert quantized > 0
    written = path.stat().st_mtime_ns

    runs.clear()
    second = _load(gguf)
    assert "dims" not in runs  # the dims came from the file
    assert runs.count("quantize") == (quantized if room == "dims" else 0)
    assert _decoder(second).copies.missed > 0  # the bfloat16 weights were made again
    for name in kept:
        assert torch.equal(_decoder(second).copies.made[name], made[name])
    assert path.stat().st_mtime_ns == written
    a = rag_token_generate(first, QUESTION, _hits(tiny_models), max_new_tokens=6)
    b = rag_token_generate(second, QUESTION, _hits(tiny_models), max_new_tokens=6)
    assert a.token_ids and a.token_ids == b.token_ids and a.logprob == b.logprob
