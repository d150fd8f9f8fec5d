"""The 4-bit copies of weights a file keeps in 4 bits: a weight on a 4-bit grid per group of 32
inputs is found and held to bfloat16 rounding, any other is refused, the kernel's product
equals a float64 loop over what the copy holds, and which products read the copy."""

from __future__ import annotations

import pytest
import torch

from ragdesk.core.engine.int4_kernels import (
    GROUP,
    Int4Groups,
    NotOnAGrid,
    dequantized,
    grid_levels,
    holds_in_4_bits,
    int4_groups_available,
    quantize_groups,
)
from ragdesk.core.engine.lean_parts import Linear, WeightCopies

pytestmark = pytest.mark.skipif(not int4_groups_available(),
                                reason="this torch build has no 4-bit CPU kernel")


def grid_weight(rows: int, cols: int, seed: int = 0, levels: int = 16) -> torch.Tensor:
    """``min + level · step`` per group of 32 inputs, as llama.cpp's Q4_K blocks dequantize
    (``levels``: how many levels the grid has; 32 is a 5-bit one)."""
    g = torch.Generator().manual_seed(seed)
    groups = (rows, cols // GROUP)
    step = torch.rand(groups, generator=g) * 0.05 + 1e-3
    low = -torch.rand(groups, generator=g) * 0.4
    level = torch.randint(0, levels, (*groups, GROUP), generator=g).float()
    level[0, 0] = torch.arange(GROUP).float() % levels  # every level of the grid
    level[1, 0] = 3 + torch.arange(GROUP).float() % 7  # only levels 3 to 9
    w = (low[..., None] + level * step[..., None]).reshape(rows, cols)
    w[2, :GROUP] = 0.7  # a group of equal weights
    w[5] = 0.0  # an all-zero row
    return w


def test_a_weight_on_a_4bit_grid_is_held_to_bfloat16_rounding() -> None:
    # 600 rows: more than one block of rows, the last one partial
    w = grid_weight(608, 4 * GROUP)
    levels, scales_zeros = grid_levels(w)
    assert levels.dtype == torch.int32 and scales_zeros.dtype == torch.bfloat16
    assert scales_zeros.shape == (4, 608, 2)
    assert int(levels.min()) >= 0 and int(levels.max()) <= 15
    deq = dequantized(levels, scales_zeros)
    step = scales_zeros.float()[..., 0].t().repeat_interleave(GROUP, dim=1)
    zero = scales_zeros.float()[..., 1].t().repeat_interleave(GROUP, dim=1)
    # only the scale's and the zero's bfloat16 rounding: 2^-9 of each, 8 steps from the zero
    assert bool(((deq - w).abs() <= (8 * step + zero.abs()) * 2 ** -8 + 1e-7).all())
    # as close as the bfloat16 copy of the same weight, within a factor of 2
    bf16_off = (w.to(torch.bfloat16).float() - w).abs().max()
    assert float((deq - w).abs().max()) <= 2 * float(bf16_off)
    assert float(deq[5].abs().max()) == 0.0 and bool((deq[2, :GROUP] == deq[2, 0]).all())
    assert levels[0, :GROUP].tolist() == list(range(16)) * 2  # all 16 levels, in order


@pytest.mark.parametrize("kind", ["gaussian", "5-bit grid"])
def test_a_weight_off_a_4bit_grid_is_refused(kind: str) -> None:
    g = torch.Generator().manual_seed(3)
    w = (torch.randn((64, 2 * GROUP), generator=g) if kind == "gaussian"
         else grid_weight(64, 2 * GROUP, levels=32))
    with pytest.raises(NotOnAGrid):
        grid_levels(w)
    assert not holds_in_4_bits([w])
    # one part off the grid is enough (q|k|v fused, with v kept in more bits)
    assert not holds_in_4_bits([grid_weight(64, 2 * GROUP), w])
    assert holds_in_4_bits([grid_weight(64, 2 * GROUP), grid_weight(32, 2 * GROUP, seed=1)])


def test_the_product_equals_a_float64_loop_over_what_the_copy_holds() -> None:
    w = grid_weight(48, 2 * GROUP)
    q = Int4Groups(**quantize_groups(w))
    x = torch.randn((3, 2 * GROUP), generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    got = q(x).double()
    deq = dequantized(*grid_levels(w)).double()
    want = torch.empty((3, 48), dtype=torch.float64)
    for m in range(3):
        for n in range(48):
            want[m, n] = sum(float(x[m, k]) * float(deq[n, k]) for k in range(2 * GROUP))
    # the kernel returns bfloat16: 8 bits of mantissa
    assert torch.allclose(got, want, rtol=2 ** -7, atol=1e-3 * float(want.abs().max()))
    assert q.nbytes == 48 * GROUP + 2 * (2 * 48 * 2)


def test_a_weight_on_the_grid_takes_a_4bit_copy_for_few_rows() -> None:
    w = grid_weight(64, 2 * GROUP)
    bias = torch.randn(64, generator=torch.Generator().manual_seed(4))
    copies = WeightCopies()
    lin = Linear([w], [bias], "bfloat16", copies)
    lin.add_int4_groups(4)
    assert isinstance(lin.copy_for(1), Int4Groups) and isinstance(lin.copy_for(4), Int4Groups)
    assert lin.copy_for(5) is None
    assert {"groups.on_grid", "groups.packed", "groups.scales_zeros"} <= set(copies.made)
    x = torch.randn((6, 2 * GROUP), generator=torch.Generator().manual_seed(2))
    bf16 = torch.nn.functional.linear(x.to(torch.bfloat16), w.to(torch.bfloat16),
                                      bias.to(torch.bfloat16)).float()
    four = lin(x[:4])
    assert lin.groups is not None
    assert torch.equal(four, (lin.groups(x[:4]) + bias.to(torch.bfloat16)).float())
    # the same weights: the bfloat16 product's own rounding apart
    assert torch.allclose(four, bf16[:4], rtol=2 ** -6, atol=2e-2 * float(bf16.abs().max()))
    assert torch.equal(lin(x), torch.mm(w.to(torch.bfloat16), x.to(torch.bfloat16).t()).t()
                       .add(bias.to(torch.bfloat16)).float())  # 6 rows: the bfloat16 weight


def test_a_weight_off_the_grid_takes_none_and_says_so_once() -> None:
    copies = WeightCopies()
    lin = Linear([torch.randn(64, 2 * GROUP)], None, "bfloat16", copies)
    lin.add_int4_groups(8)
    assert lin.groups is None and lin.copy_for(1) is None
    assert int(copies.made["groups.on_grid"][0]) == 0 and "groups.packed" not in copies.made
    # a later start takes the answer from the stored copies instead of looking again
    again = Linear([torch.randn(64, 2 * GROUP)], None, "bfloat16", WeightCopies(copies.made))
    missed = again.copies.missed  # the bfloat16 weight: stored as well
    again.add_int4_groups(8)
    assert again.groups is None and missed == again.copies.missed == 0


def test_rows_the_first_look_skipped_can_still_refuse_the_copy() -> None:
    w = grid_weight(256, 2 * GROUP)
    w[7, 3] += 1e-3 * float(w[7].abs().max())  # row 7: not among the rows first looked at
    assert holds_in_4_bits([w])
    lin = Linear([w], None, "bfloat16")
    lin.add_int4_groups(8)
    assert lin.groups is None


@pytest.mark.parametrize(("rows", "cols"), [(40, 64), (64, 48)])
def test_shapes_the_kernel_does_not_take_keep_no_4bit_copy(rows: int, cols: int) -> None:
    lin = Linear([grid_weight(rows, 64)[:, :cols]], None, "bfloat16")
    lin.add_int4_groups(8)
    assert lin.groups is None and lin.copy_for(1) is None


def test_float32_and_int8_linears_take_no_4bit_copy() -> None:
    for precision in ("float32", "int8"):
        lin = Linear([grid_weight(64, GROUP)], None, precision)
        lin.add_int4_groups(8)
        assert lin.groups is None
