"""ragdesk's lean tokenizer against transformers' AutoTokenizer on a real model folder, over the
prompts ragdesk builds: NQ-open questions with passages drawn from a snapshot, both answer
styles, per-passage and read-together prompts (through the chat template where the folder has
one), the passages alone and as a batch; ids with and without special tokens, decoding with and
without them, and every special-token attribute the engine reads. Exits non-zero on the first
difference.

    python scripts/check_tokenizer_parity.py DATA/models/starter/gemma-3-270m-q4_k_m.gguf.hf \\
        DATA/snapshots/vital-articles/passages.sqlite ../shared/data/nq-open-dev.jsonl \\
        [--questions 200] [--skip 1000]
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
from pathlib import Path
from typing import Any

from ragdesk.core.engine.prompts import (
    chat_messages,
    plain_prompt,
    together_chat_messages,
    together_plain_prompt,
)
from ragdesk.core.lean_tokenizer import read_lean_tokenizer

ATTRIBUTES = ("all_special_ids", "all_special_tokens", "eos_token_id", "pad_token_id",
              "bos_token_id", "padding_side", "chat_template")


def _prompts(tok: Any, question: str, passages: list[tuple[str, str]], style: str) -> list[str]:
    title, text = passages[0]
    if not tok.chat_template:
        return [together_plain_prompt(question, passages, style),
                plain_prompt(question, title, text, style)]
    return [tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True)
            for m in (together_chat_messages(question, passages, style),
                      chat_messages(question, title, text, style))]


def _same_text(lean: Any, ref: Any, text: str) -> None:
    for special in (True, False):
        assert lean(text, add_special_tokens=special)["input_ids"] == ref(
            text, add_special_tokens=special)["input_ids"], text[:80]
    ids = ref(text, add_special_tokens=False)["input_ids"]
    for skip in (True, False):
        for part in (ids, ids[-7:]):
            assert lean.decode(part, skip_special_tokens=skip) == ref.decode(
                part, skip_special_tokens=skip), text[:80]


def main() -> None:
    from transformers import AutoTokenizer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("passages", type=Path, help="a snapshot's passages.sqlite")
    ap.add_argument("questions", type=Path, help="NQ-open style JSONL")
    ap.add_argument("--questions", dest="n", type=int, default=200)
    ap.add_argument("--skip", type=int, default=1000)
    args = ap.parse_args()
    lean = read_lean_tokenizer(args.folder)
    assert lean is not None, "ragdesk reads this folder's tokenizer with transformers"
    ref = AutoTokenizer.from_pretrained(str(args.folder), trust_remote_code=False)
    assert len(lean) == len(ref) and lean.get_vocab() == ref.get_vocab()
    for name in ATTRIBUTES:
        assert getattr(lean, name) == getattr(ref, name), name
    assert ({k: (v.content, v.special) for k, v in lean.added_tokens_decoder.items()}
            == {k: (v.content, v.special) for k, v in ref.added_tokens_decoder.items()})
    rows = sqlite3.connect(args.passages).execute("SELECT title, text FROM passages").fetchall()
    lines = args.questions.read_text(encoding="utf-8").splitlines()[args.skip:args.skip + args.n]
    rng, texts = random.Random(0), 0
    for line in lines:
        question = json.loads(line)["question"]
        passages = [(str(t), str(x)) for t, x in rng.sample(rows, 5)]
        for style in ("short", "sentence"):
            prompts = _prompts(ref, question, passages, style)
            assert _prompts(lean, question, passages, style) == prompts, question
            for text in prompts + [p[1] for p in passages]:
                _same_text(lean, ref, text)
                texts += 1
        batch = [p[1] for p in passages]
        assert lean(batch, add_special_tokens=False)["input_ids"] == ref(
            batch, add_special_tokens=False)["input_ids"]
    singles = [[rng.randrange(len(ref))] for _ in range(2000)]
    for skip in (True, False):
        assert lean.batch_decode(singles, skip_special_tokens=skip) == ref.batch_decode(
            singles, skip_special_tokens=skip)
    print(f"{args.folder.name}: {len(lines)} questions, {texts} texts: ids, decoding, chat "
          "template and special tokens equal")


if __name__ == "__main__":
    main()
