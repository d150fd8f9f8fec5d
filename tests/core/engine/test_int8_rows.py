"""The int8 copies the bfloat16 decoder's few-row products read: the quantization's error
bound, the product against a float64 loop over the dequantized weight, and which rows take
which path."""

from __future__ import annotations

import pytest
import torch

from ragdesk.core.engine.int8_kernels import Int8Rows, int8_rows_available, quantize_rows
from ragdesk.core.engine.lean_parts import Linear

pytestmark = pytest.mark.skipif(not int8_rows_available(),
                                reason="this torch build has no int8-rows CPU kernel")


def _weight(rows: int, cols: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    w = torch.randn((rows, cols), generator=g)
    w[3] *= 40.0  # rows of very different sizes: each needs its own scale
    w[5] = 0.0  # an all-zero row must not divide by zero
    return w


def test_each_weight_is_within_one_step_of_its_row_and_half_a_step_on_average() -> None:
    # 4,100 rows: more than one block of the blockwise quantization, the last one partial
    w = _weight(4100, 64).to(torch.bfloat16)
    q = Int8Rows(**quantize_rows(w))
    assert q.q.dtype == torch.int8 and q.scales.dtype == torch.bfloat16
    assert int(q.q.abs().max()) <= 127
    step = q.scales.float()[:, None]
    err = (w.float() - q.dequantized()).abs()
    # rounding to the nearest step: at most half a step, plus the clamp at 127 where the
    # scale was rounded down to bfloat16 (at most 127 * 2^-8 of a step more)
    assert bool((err <= step * (0.5 + 127 / 256) + 1e-12).all())
    assert float((err / step.clamp(min=1e-30))[step[:, 0] > 0].mean()) < 0.3
    assert bool((q.dequantized()[5] == 0).all())
    # the largest weight of every non-zero row lands on ±127 or ±126 steps
    top = q.q.abs().amax(dim=1)[w.float().abs().amax(dim=1) > 0]
    assert int(top.min()) >= 126


def test_the_product_equals_a_float64_loop_over_the_dequantized_weight() -> None:
    w = _weight(300, 48).to(torch.bfloat16)
    q = Int8Rows(**quantize_rows(w))
    x = torch.randn((3, 48), generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    got = q(x).double()
    deq = q.dequantized().double()
    want = torch.empty((3, 300), dtype=torch.float64)
    for m in range(3):
        for n in range(300):
            want[m, n] = sum(float(x[m, k]) * float(deq[n, k]) for k in range(48))
    # the kernel returns bfloat16: 8 bits of mantissa
    assert torch.allclose(got, want, rtol=2 ** -7, atol=1e-3 * float(want.abs().max()))


def test_few_rows_read_the_int8_copy_and_more_rows_the_bfloat16_weight() -> None:
    w = _weight(200, 32)
    bias = torch.randn(200, generator=torch.Generator().manual_seed(4))
    lin = Linear([w], [bias], "bfloat16")
    plain = lin(torch.randn(2, 32))  # before any copy: bfloat16 for every row count
    assert plain.dtype == torch.float32
    lin.add_int8_rows(4)
    assert lin.rows is not None
    x = torch.randn((6, 32), generator=torch.Generator().manual_seed(2))
    xb = x.to(torch.bfloat16)
    bf16 = torch.nn.functional.linear(xb, w.to(torch.bfloat16),
                                      bias.to(torch.bfloat16)).float()
    int8 = (lin.rows(xb) + bias.to(torch.bfloat16)).float()
    assert not torch.equal(bf16[:4], int8[:4])  # the two paths differ: the test can tell
    assert torch.equal(lin(x[:4]), int8[:4])
    assert torch.equal(lin(x[:1]), int8[:1])
    # 6 rows > 4: the bfloat16 weight, as (W @ x.T).T: the same products, summed in another
    # order, so within bfloat16 rounding of F.linear and far closer than the int8 copy
    six = lin(x)
    assert torch.allclose(six, bf16, rtol=2 ** -7, atol=1e-2)  # one bfloat16 rounding step
    assert float((six - bf16).abs().mean()) < float((int8[:4] - bf16[:4]).abs().mean()) / 2
    many = torch.randn((40, 32), generator=torch.Generator().manual_seed(3))
    assert torch.equal(lin(many), torch.nn.functional.linear(  # more than 32 rows: F.linear
        many.to(torch.bfloat16), w.to(torch.bfloat16), bias.to(torch.bfloat16)).float())
    # and the copy stays close to the bfloat16 product it stands in for
    assert torch.allclose(int8, bf16, rtol=0.05, atol=0.05 * float(bf16.abs().max()))


def test_float32_and_int8_linears_take_no_copy() -> None:
    w = _weight(64, 32)
    for precision in ("float32", "int8"):
        lin = Linear([w], None, precision)
        lin.add_int8_rows(8)
        assert lin.rows is None
