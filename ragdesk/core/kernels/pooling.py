"""Pooling a transformer's token vectors into one vector per text."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def pool_tokens(hidden: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """One vector per row of right-padded token vectors [batch, tokens, dim]: the one pooling
    implementation (the transformers forward, the fused kernel and training all use it).

    Computed as sentence-transformers' ``Pooling`` does for right-padded rows.
    """
    import torch

    if pooling == "cls":
        return hidden[:, 0]
    m = mask.unsqueeze(-1).to(hidden.dtype)
    if pooling == "max":
        return hidden.masked_fill(m == 0, float("-inf")).max(dim=1).values
    if pooling == "lasttoken":
        last = (mask.sum(1) - 1).clamp(min=0).to(torch.long)
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
