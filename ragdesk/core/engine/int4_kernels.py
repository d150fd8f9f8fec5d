"""4-bit copies of the weights a model's file already keeps in 4 bits, multiplied with bfloat16
inputs by ``torch._weight_int4pack_mm_for_cpu``: a quarter of a bfloat16 weight's bytes, half of
an int8 copy's, for the memory-bound products of a decoding step's few rows.

llama.cpp's Q4_K blocks hold each run of 32 weights of a row as ``min + level · step`` with
levels 0-15; dequantized to float32, those weights still lie on that grid exactly, and the
kernel's own form, ``(level - 8) · scale + zero`` per 32 inputs, holds them with the scale and
zero rounded to bfloat16 (about as far from the file's weights as the bfloat16 copy
itself). :func:`grid_levels` finds the grid of each group from the weights alone and refuses a
weight that any group of is not on one (a 5-, 6- or 8-bit block, or weights never quantized):
4 bits taken from those would be coarser than the file, which measured costs right answers
(docs/benchmarks.md).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# Input dimensions sharing one scale and zero: the sub-blocks of llama.cpp's Q4_K blocks.
GROUP = 32
# the kernel's layout packs output rows in blocks of this many
_ROW_BLOCK = 16
_LEVELS = 15  # 4 bits: levels 0..15
_MID = 8  # the kernel reads a weight as (level - 8) * scale + zero
# Rows examined at a time (each block's temporaries stay in the processor's caches)
_BLOCK_ROWS = 256
# How far from a whole level a weight may sit (in steps): float32 rounding of the file's
# dequantization leaves about 1e-6; a weight off the grid sits up to half a step away.
_OFF_GRID = 1e-3
# Rows :func:`holds_in_4_bits` looks at before the whole weight is examined
_SAMPLE_ROWS = 64


class Int4Groups:
    """A weight [N, K] as 4-bit levels with a bfloat16 scale and zero per 32 inputs of a row
    (:func:`quantize_groups`): weight = (level - 8) · scale + zero."""

    __slots__ = ("packed", "scales_zeros")

    def __init__(self, packed: torch.Tensor, scales_zeros: torch.Tensor) -> None:
        self.packed = packed
        self.scales_zeros = scales_zeros

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` [M, K] (multiplied in bfloat16) -> bfloat16 [M, N]."""
        import torch

        out: torch.Tensor = torch._weight_int4pack_mm_for_cpu(
            x.to(torch.bfloat16).contiguous(), self.packed, GROUP, self.scales_zeros)
        return out

    @property
    def nbytes(self) -> int:
        """What a product reads: the packed levels, the scales and the zeros."""
        return int(self.packed.numel() + 2 * self.scales_zeros.numel())


class NotOnAGrid(ValueError):
    """A weight that some group of 32 inputs of does not hold on a 4-bit grid."""


def fits(weight: torch.Tensor) -> bool:
    """Whether the kernel takes ``weight``'s shape: whole groups, whole blocks of rows."""
    return (weight.dim() == 2 and int(weight.shape[1]) % GROUP == 0
            and int(weight.shape[0]) % _ROW_BLOCK == 0)


def grid_levels(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The levels (int32 0..15, [N, K]) and the bfloat16 scales and zeros ([K / 32, N, 2], the
    kernel's layout) of ``weight`` [N, K] (float32, as the file's dequantization gives it), each
    group of 32 inputs being ``min + level · step`` with levels 0-15, the zero ``min + 8 ·
    step``. Raises :class:`NotOnAGrid` for a weight with a group on no such grid."""
    import torch

    w = weight.detach()
    n, k = int(w.shape[0]), int(w.shape[1])
    levels = torch.empty((n, k), dtype=torch.int32)
    scales_zeros = torch.empty((k // GROUP, n, 2), dtype=torch.bfloat16)
    for i in range(0, n, _BLOCK_ROWS):
        block = w[i:i + _BLOCK_ROWS].float().reshape(-1, k // GROUP, GROUP)
        level, step, low = _block_levels(block)
        scales_zeros[:, i:i + _BLOCK_ROWS, 0] = step.t().to(torch.bfloat16)
        scales_zeros[:, i:i + _BLOCK_ROWS, 1] = (low + _MID * step).t().to(torch.bfloat16)
        levels[i:i + _BLOCK_ROWS] = level.reshape(-1, k)
    return levels, scales_zeros


def _block_levels(block: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(levels int32 [R, G, 32], step [R, G], min [R, G]) of a block of groups. A group on a
    grid spans a whole number L <= 15 of steps from its smallest weight to its largest, so its
    step is its span over L: tried from L = 15 down (most of a Q4_K file's groups use all 16
    levels, the rest nearly all), each L on the groups still unplaced."""
    import torch

    groups = block.reshape(-1, GROUP)
    low = groups.amin(dim=1)
    span = groups.amax(dim=1) - low
    step = torch.zeros_like(span)  # a group of equal weights: step 0, every level 0
    level = torch.zeros(groups.shape, dtype=torch.int32)
    left = (span > 0).nonzero().squeeze(1)
    for whole_steps in range(_LEVELS, 0, -1):
        if left.numel() == 0:
            break
        candidate = span[left] / whole_steps
        exact = (groups[left] - low[left, None]) / candidate[:, None]
        whole = exact.round()
        placed = ((exact - whole).abs() <= _OFF_GRID).all(dim=1)
        level[left[placed]] = whole[placed].to(torch.int32)
        step[left[placed]] = candidate[placed]
        left = left[~placed]
    if left.numel():
        raise NotOnAGrid("a group of 32 weights is not on a 4-bit grid")
    shape = block.shape[:2]
    return level.reshape(block.shape), step.reshape(shape), low.reshape(shape)


def holds_in_4_bits(parts: Sequence[torch.Tensor]) -> bool:
    """Whether every part of a weight (the fused parts of q|k|v, say) is on a 4-bit grid in
    the rows looked at: a few rows spread over each part, so that a weight kept in more bits
    is turned down at a small fraction of examining it all."""
    import torch

    for part in parts:
        if part.dim() != 2 or int(part.shape[1]) % GROUP:
            return False
        n = int(part.shape[0])
        rows = torch.linspace(0, n - 1, min(n, _SAMPLE_ROWS)).round().long()
        try:
            grid_levels(part.detach()[rows].float())
        except NotOnAGrid:
            return False
    return True


def dequantized(levels: torch.Tensor, scales_zeros: torch.Tensor) -> torch.Tensor:
    """The float32 weight [N, K] that ``levels`` and ``scales_zeros`` stand for."""
    n, k = int(levels.shape[0]), int(levels.shape[1])
    sz = scales_zeros.float().transpose(0, 1)  # [N, K / 32, 2]
    grouped = (levels.float().reshape(n, k // GROUP, GROUP) - _MID) * sz[..., 0:1] + sz[..., 1:2]
    return grouped.reshape(n, k)


def quantize_groups(weight: torch.Tensor) -> dict[str, torch.Tensor]:
    """``packed`` (the kernel's layout of :func:`grid_levels`' levels, two to a byte: uint8
    [N, K / 2]; :func:`int4_groups_available` checks that this build lays them out so) and
    ``scales_zeros`` of a weight for :class:`Int4Groups`. Copies made here are stored for
    later processes under ragdesk's and torch's versions
    (:mod:`ragdesk.core.models.weight_copies`): a change to this arithmetic comes with a new
    version."""
    import torch

    levels, scales_zeros = grid_levels(weight)
    packed = torch._convert_weight_to_int4pack_for_cpu(levels, 1)
    return {"packed": packed, "scales_zeros": scales_zeros}


@functools.cache
def int4_groups_available() -> bool:
    """Whether this torch build multiplies bfloat16 by 4-bit groups on the CPU (checked once
    on a small product)."""
    import torch

    try:
        w = torch.zeros((_ROW_BLOCK, GROUP))
        w[3, :] = torch.arange(GROUP) % 16 * 0.25 - 1.0  # levels 0..15, step 0.25, min -1
        parts = quantize_groups(w)
        if tuple(parts["packed"].shape) != (_ROW_BLOCK, GROUP // 2):
            return False
        got = Int4Groups(**parts)(torch.ones((1, GROUP)))
        return bool(parts["packed"].dtype == torch.uint8 and float(got[0, 3]) == float(w[3].sum())
                    and float(got[0, 4]) == 0.0)
    except (AttributeError, RuntimeError, NotImplementedError, NotOnAGrid):
        return False
