"""The prefix tree used for rescoring, and the lean BART decoder against transformers'."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from ragdesk.core.engine.generators import PassageText
from ragdesk.core.engine.prefix_tree import PrefixTree


def test_prefix_tree_shares_prefixes() -> None:
    hyps = [[5, 6, 7, 2], [5, 6, 8, 2], [9, 2], [5, 6, 7, 2]]
    tree = PrefixTree.build(hyps)
    assert len(tree) == 8  # 5 6 7 2 | 8 2 | 9 2
    for hyp, path in zip(hyps, tree.paths, strict=True):
        assert [tree.tokens[n] for n in path] == hyp
        assert [tree.depth[n] for n in path] == list(range(len(hyp)))
        assert all(tree.parent[b] == a for a, b in itertools.pairwise(path))
    assert tree.paths[0] == tree.paths[3]
    inner = tree.inputs()
    assert inner == sorted({n for path in tree.paths for n in path[:-1]})
    anc = tree.ancestry(inner)
    for i, node in enumerate(inner):
        expected = set()
        p = node
        while p >= 0:
            expected.add(p)
            p = tree.parent[p]
        assert {inner[j] for j in range(len(inner)) if anc[i, j]} == expected & set(inner)


def test_tree_scoring_equals_one_by_one(bart_gen: Any, make_cases: Any) -> None:
    import torch

    case = make_cases(8)
    ctx = bart_gen.prepare(case.question, [PassageText(h.title, h.text) for h in case.hits])
    eos, pad = bart_gen.settings.eos_token_ids[0], bart_gen.settings.pad_token_id
    hyps = [[40, 41, 42, 43, eos], [40, 41, 50, eos], [40, 41, 42, 44, 45, eos], [60, eos]]
    tree = PrefixTree.build(hyps)
    width = max(len(h) for h in hyps)
    padded = torch.full((len(hyps), width), pad, dtype=torch.long)
    for i, h in enumerate(hyps):
        padded[i, :len(h)] = torch.tensor(h)
    for z in range(len(case.hits)):
        one_by_one = ctx.score(z, padded)
        tree_lp = tree.per_hypothesis(ctx.score_tree(z, tree), width, 0.0)
        for i, h in enumerate(hyps):
            assert tree_lp[i, :len(h)].tolist() == pytest.approx(
                one_by_one[i, :len(h)].tolist(), rel=1e-5, abs=1e-5)


@pytest.mark.parametrize("layout", ["minor", "major", "single"])
def test_lean_decoder_steps_equal_transformers(bart_gen: Any, make_cases: Any,
                                               layout: str) -> None:
    """Rows on passages laid out as beams use (g*K + z), as RAG-Sequence uses (z*G + g), or
    all on one passage: each row's logits equal a transformers forward of that row alone."""
    import torch

    case = make_cases(9)
    k = len(case.hits)
    ctx = bart_gen.prepare(case.question, [PassageText(h.title, h.text) for h in case.hits])
    if layout == "minor":
        rows = torch.arange(k).repeat(2)
    elif layout == "major":
        rows = torch.arange(k).repeat_interleave(2)
    else:
        rows = torch.full((3,), 2)
    dec = ctx.rows(rows, 4)
    g = torch.Generator().manual_seed(0)
    fed = torch.randint(5, 1500, (rows.numel(), 3), generator=g)
    outs = [dec.step(fed[:, i]) for i in range(3)]
    start = bart_gen.settings.start_token_id
    for r, z in enumerate(rows.tolist()):
        ids = torch.tensor([ctx.input_ids[z]])
        with torch.no_grad():
            full = bart_gen.model(input_ids=ids, decoder_input_ids=torch.tensor(
                [[start, *fed[r].tolist()]]), use_cache=False).logits[0]
        for i in range(3):
            diff = (outs[i][r] - full[i + 1]).abs().max().item()
            # float32 sums in another order on large random activations; a wrong mask or position
            # would be off by units, not thousandths
            assert diff <= 1e-3, (r, i, diff)
