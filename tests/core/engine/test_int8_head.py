"""The output layer's few-row products with int8 inputs (:class:`Int8Head`): against a float64
reference within the stated bound, what leaving the large dimensions out of the int8 scale
buys, and how the decoder finds those dimensions and keeps them with its stored copies."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ragdesk.core.engine import lean_parts
from ragdesk.core.engine.int8_kernels import (
    Int8Head,
    Int8Rows,
    int8_head_available,
    int8_rows_available,
    outlier_dims,
    quantize_rows,
)
from ragdesk.core.engine.lean_parts import Linear, WeightCopies

needs_kernel = pytest.mark.skipif(not int8_head_available(),
                                  reason="no oneDNN int8 x int8 kernel or no VNNI/AMX here")


def _weight(rows: int, cols: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn((rows, cols), generator=g) * 0.05).to(torch.bfloat16)


def _inputs(m: int, cols: int, big: list[int], seed: int = 1) -> torch.Tensor:
    """Rows like a final norm's output: most values of order 1, a few dimensions ~50x."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((m, cols), generator=g)
    x[:, big] *= 50.0
    return x


def _head(w: torch.Tensor, dims: list[int]) -> Int8Head:
    d = torch.tensor(dims, dtype=torch.long)
    return Int8Head(Int8Rows(**quantize_rows(w)), d, w[:, d].float())


def test_outlier_dims_are_the_largest_over_all_tokens_in_order() -> None:
    h = torch.randn(10, 40, generator=torch.Generator().manual_seed(0))
    h[3, 17] = -90.0  # one token's large value counts, whatever its sign
    h[:, 5] *= 30.0
    h[7, 33] = 60.0
    assert outlier_dims(h, 3).tolist() == [5, 17, 33]
    assert outlier_dims(h, 100).numel() == 40  # no more than there are


@needs_kernel
def test_the_product_is_within_its_bound_of_a_float64_reference() -> None:
    w = _weight(300, 64)
    big = [3, 40]
    head = _head(w, big)
    x = _inputs(5, 64, big)
    got = head(x).double()
    assert got.shape == (5, 300) and head(x).dtype == torch.float32
    deq = head.rows.dequantized().double()
    kept = torch.ones(64, dtype=torch.float64)
    kept[big] = 0.0
    xd = x.double()
    want = torch.empty((5, 300), dtype=torch.float64)
    for m in range(5):
        for n in range(300):
            want[m, n] = (sum(float(xd[m, k] * kept[k] * deq[n, k]) for k in range(64))
                          + sum(float(xd[m, k]) * float(w[n, k]) for k in big))
    bound = head.error_bound(x).double()
    # float32 sums and scales on top of the int8 inputs' rounding
    slack = 1e-5 * want.abs().max()
    assert bool(((got - want).abs() <= bound + slack).all())
    assert float((got - want).abs().max()) > 0  # the inputs are rounded: the test can tell


@needs_kernel
def test_inputs_at_both_ends_of_the_int8_range_multiply_exactly() -> None:
    """Integer inputs whose largest magnitude is 127 are their own int8 values (step 1):
    the product then has no input rounding, so -127 and +127 (handed to oneDNN shifted by
    its zero point) must give the float64 sums of the int8 weights to float32 rounding."""
    w = _weight(200, 64, seed=3)
    head = _head(w, [0])
    g = torch.Generator().manual_seed(4)
    x = torch.randint(-127, 128, (3, 64), generator=g).float()
    x[:, 0] = 0.0  # the one float32 dim stays out of the int8 product
    x[0, 5], x[1, 9], x[2, 11] = -127.0, 127.0, -127.0
    x[2, 12] = 127.0
    got = head(x).double()
    deq = head.rows.dequantized().double()
    want = x.double() @ deq.t()
    assert float((got - want).abs().max()) <= 1e-6 * float(want.abs().max())


@needs_kernel
def test_leaving_the_large_dims_out_of_the_int8_scale_keeps_the_products_close() -> None:
    w = _weight(2000, 128)
    big = [7, 64, 100]
    x = _inputs(5, 128, big)
    exact = x @ w.float().t()  # the weight the int8 copy stands in for
    with_dims = (_head(w, big)(x) - exact).abs().mean()
    one_scale = (_head(w, [0])(x) - exact).abs().mean()  # the large dims inside the scale
    bf16_inputs = (Int8Rows(**quantize_rows(w))(x).float() - exact).abs().mean()
    assert float(with_dims) < float(one_scale) / 5
    # closer than the int8 weight read with bfloat16 inputs, the kernel it replaces
    assert float(with_dims) < float(bf16_inputs)


@needs_kernel
def test_a_linear_takes_its_dims_from_stored_copies_and_asks_only_without_them() -> None:
    w = torch.randn((500, 64), generator=torch.Generator().manual_seed(3))
    asked: list[int] = []

    def find(n: int) -> torch.Tensor:
        asked.append(n)
        return torch.arange(n, dtype=torch.long) * 3

    first = Linear([w], None, "bfloat16", WeightCopies().scope("lm_head"))
    first.add_int8_head(8, find)
    assert isinstance(first.rows, Int8Head) and asked == [8]  # 64 // 8 dims at most
    assert first.rows.dims.tolist() == [0, 3, 6, 9, 12, 15, 18, 21]
    stored = first.copies.made
    assert {"lm_head.head.dims", "lm_head.head.columns"} <= set(stored)
    again = Linear([w], None, "bfloat16", WeightCopies(stored).scope("lm_head"))
    again.add_int8_head(8, find)
    assert asked == [8] and again.copies.missed == 0
    x = torch.randn((3, 64), generator=torch.Generator().manual_seed(4))
    assert torch.equal(first(x), again(x))


def test_without_the_kernel_the_few_rows_keep_the_int8_rows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    if not int8_rows_available():
        pytest.skip("no int8-rows kernel in this torch build")
    monkeypatch.setattr(lean_parts, "int8_head_available", lambda: False)
    lin = Linear([torch.randn((100, 32))], None, "bfloat16")

    def find(n: int) -> Any:
        raise AssertionError("no dims are needed without the kernel")

    lin.add_int8_head(8, find)
    assert isinstance(lin.rows, Int8Rows)
