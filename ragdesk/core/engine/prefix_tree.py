"""The hypotheses of RAG-Sequence as a prefix tree, for rescoring them in one pass.

Beam search hypotheses share long prefixes. Teacher-forcing them one by one recomputes each
shared prefix once per hypothesis; fed as one sequence whose tokens attend only to their
ancestors (a tree attention mask, positions = depth), every distinct prefix is computed once
and every hypothesis token still sees exactly its own history.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class PrefixTree:
    tokens: list[int]  # token of node i
    parent: list[int]  # parent node, -1 for a first token
    depth: list[int]  # position of the token in its hypotheses (0 = first answer token)
    paths: list[list[int]]  # node of every position of every hypothesis

    @classmethod
    def build(cls, hyps: Sequence[Sequence[int]]) -> PrefixTree:
        tokens: list[int] = []
        parent: list[int] = []
        depth: list[int] = []
        children: dict[tuple[int, int], int] = {}
        paths = []
        for hyp in hyps:
            node, path = -1, []
            for d, tok in enumerate(hyp):
                key = (node, int(tok))
                child = children.get(key)
                if child is None:
                    child = children[key] = len(tokens)
                    tokens.append(int(tok))
                    parent.append(node)
                    depth.append(d)
                node = child
                path.append(node)
            paths.append(path)
        return cls(tokens, parent, depth, paths)

    def __len__(self) -> int:
        return len(self.tokens)

    def inputs(self) -> list[int]:
        """Nodes whose continuation must be predicted (they have children), parents first."""
        return sorted({p for p in self.parent if p >= 0})

    def ancestry(self, nodes: list[int]) -> torch.Tensor:
        """[n, n] bool: ``nodes[j]`` is ``nodes[i]`` or one of its ancestors."""
        import torch

        where = {node: i for i, node in enumerate(nodes)}
        out = torch.zeros((len(nodes), len(nodes)), dtype=torch.bool)
        for i, node in enumerate(nodes):
            p = self.parent[node]
            if p >= 0:
                out[i] = out[where[p]]
            out[i, i] = True
        return out

    def node_log_probs(self, first_lp: torch.Tensor,
                       inner_lp: Callable[[list[int]], torch.Tensor]) -> torch.Tensor:
        """log p(node token | its prefix) for every node [nodes]: first tokens from
        ``first_lp`` [V]; the others from ``inner_lp(self.inputs())`` [n, V], the log-probs
        after each inner node, which a decoder computes in one pass over the tree."""
        import torch

        tokens = torch.tensor(self.tokens, dtype=torch.long)
        parent = torch.tensor(self.parent, dtype=torch.long)
        out = torch.empty(len(self), dtype=torch.float32)
        roots = parent < 0
        out[roots] = first_lp[tokens[roots]]
        inner = self.inputs()
        if inner:
            lp = inner_lp(inner)
            row_of = torch.full((len(self),), -1, dtype=torch.long)
            row_of[torch.tensor(inner, dtype=torch.long)] = torch.arange(len(inner))
            kids = ~roots
            out[kids] = lp[row_of[parent[kids]], tokens[kids]]
        return out

    def per_hypothesis(self, node_values: torch.Tensor, width: int, fill: float) -> torch.Tensor:
        """Scatter per-node values [nodes] to [hypotheses, width] (``fill`` past the end)."""
        import torch

        out = torch.full((len(self.paths), width), fill, dtype=node_values.dtype)
        for i, path in enumerate(self.paths):
            if path:
                out[i, :len(path)] = node_values[torch.tensor(path)]
        return out
