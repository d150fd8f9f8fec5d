"""One vocabulary for the answer options: one set of defaults that the engine, the settings
and the CLI all take, and settings that give back what was saved (min_new_tokens included)."""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path

import pytest

from ragdesk.core.errors import BadInputError
from ragdesk.core.options import (
    DECODINGS,
    DEFAULT_OPTIONS,
    MODES,
    PRECISIONS,
    RETRIEVERS,
    STYLES,
    AnswerOptions,
)
from ragdesk.core.settings import DEFAULTS, Settings


def test_the_engine_takes_its_defaults_from_the_options() -> None:
    from ragdesk.core.engine import Engine

    for method in (Engine.answer, Engine.answer_from_docs):
        params = inspect.signature(method).parameters
        for field in ("mode", "decoding", "num_beams", "max_new_tokens", "min_new_tokens",
                      "style", "grounded", "temperature"):
            assert params[field].default == getattr(DEFAULT_OPTIONS, field), (method, field)
    params = inspect.signature(Engine.answer).parameters
    assert params["n_docs"].default == DEFAULT_OPTIONS.n_docs
    assert params["retriever"].default == DEFAULT_OPTIONS.retriever


def test_the_settings_read_the_same_defaults() -> None:
    saved = {k: v for k, v in DEFAULT_OPTIONS.to_settings().items() if v is not None}
    assert {k: DEFAULTS[k] for k in saved} == saved
    assert AnswerOptions.from_settings({}) == DEFAULT_OPTIONS


def test_saved_options_come_back(tmp_path: Path) -> None:
    opts = AnswerOptions(mode="sequence", decoding="thorough", n_docs=7, num_beams=3,
                         max_new_tokens=40, min_new_tokens=4, retriever="hybrid",
                         style="sentence", grounded=False, precision="float32")
    s = Settings(tmp_path / "settings.json")
    s.update(opts.to_settings())
    again = AnswerOptions.from_settings(Settings(tmp_path / "settings.json").as_dict())
    assert again == opts
    assert again.min_new_tokens == 4


def test_the_cli_offers_exactly_the_allowed_values() -> None:
    from ragdesk.cli.common import add_answer_options, add_decoding_options

    p = argparse.ArgumentParser()
    add_decoding_options(p)
    add_answer_options(p)
    choices = {a.dest: tuple(a.choices) for a in p._actions if a.choices is not None}
    assert choices == {"mode": MODES, "decoding": DECODINGS, "retriever": RETRIEVERS,
                       "style": STYLES, "precision": PRECISIONS}


def test_command_line_flags_override_the_settings(tmp_path: Path) -> None:
    from ragdesk.cli.common import answer_options
    from ragdesk.core.app import AppContext

    ctx = AppContext(tmp_path / "data")
    try:
        ctx.settings.update({"mode": "sequence", "n_docs": 9, "min_new_tokens": 2})
        args = argparse.Namespace(mode=None, decoding="thorough", docs=3, beams=None,
                                  max_new_tokens=None, retriever=None, style=None,
                                  grounded=None, precision=None, temperature=None)
        opts = answer_options(args, ctx)
        assert (opts.mode, opts.decoding, opts.n_docs, opts.min_new_tokens) == (
            "sequence", "thorough", 3, 2)
        ctx.settings.set("retriever", "colbert")  # a damaged setting is named, not used
        with pytest.raises(BadInputError, match="Unknown retriever 'colbert'"):
            answer_options(args, ctx)
    finally:
        ctx.close()


@pytest.mark.parametrize("change", [
    {"mode": "both"}, {"decoding": "slow"}, {"retriever": "bm42"}, {"style": "long"},
    {"n_docs": 0}, {"num_beams": 0}, {"max_new_tokens": 0}, {"min_new_tokens": 99},
    {"precision": "float8"}])
def test_check_refuses_what_no_answer_can_use(change: dict[str, object]) -> None:
    with pytest.raises(BadInputError):
        DEFAULT_OPTIONS.replace(**change).check()


def test_replace_keeps_what_is_not_given() -> None:
    opts = DEFAULT_OPTIONS.replace(mode="sequence", n_docs=None)
    assert opts.mode == "sequence" and opts.n_docs == DEFAULT_OPTIONS.n_docs
    assert DEFAULT_OPTIONS.check() is DEFAULT_OPTIONS
