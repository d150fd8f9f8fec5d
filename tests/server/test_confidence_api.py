"""The API carries every answer's confidence; an answer below the threshold says "not found"
as its content, with its guess beside it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tests.documents.conftest import QUESTION
from tests.server.conftest import post

OPTIONS = {"retriever": "sparse", "n_docs": 2}


def _folder(data_dir: Path) -> Path:
    from ragdesk.core.app import AppContext
    from ragdesk.core.snapshots import open_snapshot

    app = AppContext(data_dir)
    try:
        snap = open_snapshot(app.data, app.catalog, "docs")
        folder = Path(snap.folder)
        snap.close()
        return folder
    finally:
        app.close()


@pytest.mark.parametrize("bias,abstains", [(-4.0, True), (4.0, False)])
def test_content_is_the_not_found_message_below_the_threshold(
        server: Any, served_data: Path, tiny_models: Any, bias: float, abstains: bool) -> None:
    from ragdesk.core.confidence import FEATURES, ConfidenceModel, write_snapshot_model

    n = len(FEATURES)
    model = ConfidenceModel(FEATURES, (0.0,) * n, (1.0,) * n, (0.0,) * n, bias, 0.5)
    folder = _folder(served_data)
    write_snapshot_model(folder, str(tiny_models.bart), model)
    try:
        body = {"model": "ragdesk", "max_tokens": 4, "ragdesk": OPTIONS,
                "messages": [{"role": "user", "content": QUESTION}]}
        status, done = post(server.url + "/v1/chat/completions", body)
        assert status == 200, done
        extra = done["ragdesk"]
        content = done["choices"][0]["message"]["content"]
        assert extra["confidence"] == pytest.approx(1 / (1 + math.exp(-bias)))
        assert extra["abstained"] is abstains
        if abstains:
            assert content.startswith("Not found in the snapshot 'docs'")
            assert extra["guess"] != content and extra["message"] == content
        else:
            assert content == extra["guess"]
        body["ragdesk"] = {**OPTIONS, "abstain": False}
        status, kept = post(server.url + "/v1/chat/completions", body)
        assert status == 200 and not kept["ragdesk"]["abstained"]
        assert kept["choices"][0]["message"]["content"] == extra["guess"]
    finally:
        (folder / "confidence.json").unlink()


def test_a_streamed_answer_that_abstains_says_so_after_its_words(
        server: Any, served_data: Path, tiny_models: Any) -> None:
    from openai import OpenAI

    from ragdesk.core.confidence import FEATURES, ConfidenceModel, write_snapshot_model

    n = len(FEATURES)
    folder = _folder(served_data)
    write_snapshot_model(folder, str(tiny_models.bart), ConfidenceModel(
        FEATURES, (0.0,) * n, (1.0,) * n, (0.0,) * n, -4.0, 0.5))
    try:
        client = OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0,
                        timeout=60)
        chunks = list(client.chat.completions.create(
            model="ragdesk", max_tokens=4, extra_body={"ragdesk": OPTIONS}, stream=True,
            messages=[{"role": "user", "content": QUESTION}]))
        extra = (chunks[-1].model_extra or {})["ragdesk"]
        assert extra["abstained"] is True
        joined = "".join(c.choices[0].delta.content or "" for c in chunks)
        # the guess streamed first; words sent cannot be taken back, so the verdict follows
        assert joined == f"{extra['guess']}\n\n{extra['message']}\nBest guess: {extra['guess']}"
        assert extra["message"].startswith("Not found in the snapshot 'docs'")
    finally:
        (folder / "confidence.json").unlink()
