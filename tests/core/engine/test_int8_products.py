"""The int8 precision's products (int8 weights, dynamically quantized u8 activations): right
where the CPU's int8 kernels sum pairs of products in saturating 16 bits (x86 without VNNI),
and the weight range chosen from the CPU's flags."""

from __future__ import annotations

import pytest
import torch

from ragdesk.core import cpu
from ragdesk.core.engine.causal_decoder import int8_available
from ragdesk.core.engine.lean_parts import Linear

needs_int8 = pytest.mark.skipif(not int8_available(),
                                reason="this torch build has no int8 CPU kernels")


@needs_int8
def test_a_product_of_all_large_inputs_is_not_cut_in_half() -> None:
    """Every activation at the top of its u8 range and every weight at its largest: each
    pair of products is as large as it gets, where 16-bit sums overflow (they gave 323.8 for
    639 here before weights were kept within 63 on such CPUs)."""
    w = torch.ones((64, 640))
    w[1] = -1.0
    x = torch.ones((3, 640))
    x[:, 0] = 0.0  # the range starts at 0: every other input quantizes to 255
    got = Linear([w], None, "int8")(x)
    want = x.double() @ w.double().T
    torch.testing.assert_close(got.double(), want, rtol=0.01, atol=0.0)


@needs_int8
def test_products_with_an_outlier_channel_stay_close_to_float() -> None:
    g = torch.Generator().manual_seed(3)
    w = torch.randn((2048, 640), generator=g) * 0.05
    x = torch.randn((5, 640), generator=g) * 3.0
    x[:, 7] = 40.0  # one large channel, as real language models have
    got = Linear([w], None, "int8")(x).double()
    want = x.double() @ w.double().T
    assert float((got - want).norm() / want.norm()) < 0.03


@pytest.mark.parametrize(("flags", "levels"), [
    (frozenset({"avx2", "fma"}), 63),
    (frozenset({"avx2", "avx512f", "avx512bw"}), 63),
    (frozenset({"avx2", "avx512f", "avx512_vnni"}), 127),
    (frozenset({"avx2", "avx_vnni"}), 127),
    (frozenset({"avx512f", "amx_int8"}), 127),
    (None, 127),  # not x86 (no flags line): no 16-bit pair sums
])
def test_weight_levels_follow_the_cpu_flags(monkeypatch: pytest.MonkeyPatch,
                                            flags: frozenset[str] | None, levels: int) -> None:
    monkeypatch.setattr(cpu, "_x86_flags", lambda: flags)
    assert cpu.int8_weight_levels() == levels
