"""Every front end names a retriever from one table: "sparse" is BM25 to the user, in the
CLI's answers and evaluation summary as in the GUI (tests/ui/test_retriever_names_gui.py)."""

from __future__ import annotations

import pytest

from ragdesk.core.options import RETRIEVERS
from ragdesk.core.retriever_names import retriever_in_sentence, retriever_title
from ragdesk.core.types import Answer


def test_every_retriever_has_a_name_and_sparse_is_bm25() -> None:
    assert [retriever_title(k) for k in RETRIEVERS] == ["Dense", "BM25", "Hybrid"]
    assert [retriever_in_sentence(k) for k in RETRIEVERS] == ["dense", "BM25", "hybrid"]


def test_a_registered_retriever_is_shown_by_its_key() -> None:
    assert retriever_title("MyRetriever") == "MyRetriever"
    assert retriever_in_sentence("MyRetriever") == "MyRetriever"


@pytest.mark.parametrize(("key", "said"), [
    ("sparse", "BM25 retrieval"), ("hybrid", "hybrid retrieval"), ("dense", "dense retrieval")])
def test_ask_names_the_retriever_that_found_the_passages(
        key: str, said: str, capsys: pytest.CaptureFixture[str]) -> None:
    from ragdesk.cli.ask_cmd import _print_sources

    _print_sources(Answer(question="q", text="a", token_ids=[], tokens=[], docs=[],
                          logprob=-1.0, mode="token", snapshot="s", retriever=key))
    assert f"RAG-Token, {said}, " in capsys.readouterr().out
