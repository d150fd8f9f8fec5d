"""The int8 kernels of the lean decoders' products: int8 rows of a bfloat16 weight read by
``torch._weight_int8pack_mm`` (:class:`Int8Rows`), the output layer's products with int8
inputs as well by oneDNN's int8 x int8 kernel (:class:`Int8Head`), and the weights packed for
``quantized.linear_dynamic`` (``precision="int8"``), with the checks of which of them this
torch build and CPU run.
"""

from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

# Rows quantized at a time into an int8 copy: each block's float32 temporaries stay in the
# processor's caches between passes (a block of 640-wide rows, the starter's, is 0.6 MB; of
# 1,536-wide rows, most of the reader's, 1.5 MB); larger blocks measured slower
# (docs/benchmarks.md).
_QUANTIZE_ROWS = 256

# Input dimensions an :class:`Int8Head` multiplies in float32 beside its int8 product (at
# most an eighth of them): enough that its products are closer to the bfloat16 weight's than
# the int8 rows read with bfloat16 inputs were, on the starter's real inputs
# (docs/benchmarks.md)
HEAD_OUTLIER_DIMS = 32

# An Int8Head's int8 inputs are handed to oneDNN as uint8 with this zero point (the same
# integers, shifted): with signed int8 inputs oneDNN uses AMX where the CPU has it, but on
# one with AVX512-VNNI and no AMX it falls back to a reference kernel, which made a decoding
# step take seconds (docs/benchmarks.md).
_INPUT_ZERO = 128


class Int8Rows:
    """A weight [N, K] as int8 with one bfloat16 scale per row (:func:`quantize_rows`),
    multiplied with bfloat16 inputs by ``torch._weight_int8pack_mm``: what llama.cpp's 8-bit
    files do, for the output layer that is half of what a bfloat16 decoding step reads. Each
    product is off the bfloat16 one by at most half a step per weight: ``Σ_k |x_k| s_n / 2``.
    The int8 weight must be 64-byte aligned (as torch allocates): the kernel's products of
    several rows crash on one that is not (seen with torch 2.13 on AVX-512)."""

    __slots__ = ("q", "scales")

    def __init__(self, q: torch.Tensor, scales: torch.Tensor) -> None:
        self.q = q
        self.scales = scales

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` [M, K] (multiplied in bfloat16) -> bfloat16 [M, N]."""
        import torch

        out: torch.Tensor = torch._weight_int8pack_mm(x.to(torch.bfloat16).contiguous(),
                                                      self.q, self.scales)
        return out

    def dequantized(self) -> torch.Tensor:
        """The weight the products use, in float32."""
        return self.q.float() * self.scales.float()[:, None]

    @property
    def nbytes(self) -> int:
        """What a product reads: the int8 weight and its scales."""
        return int(self.q.numel() + 2 * self.scales.numel())


class Int8Head:
    """Few-row products with an :class:`Int8Rows` weight whose inputs are int8 as well,
    by oneDNN's int8 x int8 kernel (VNNI or AMX): for the output layer of a decoding step,
    which it multiplies in a fraction of ``_weight_int8pack_mm``'s time (docs/benchmarks.md).

    The inputs take one symmetric int8 scale per product. The final norm's output has a few
    dimensions tens of times larger than the rest, in every token, and that one scale would
    spend its range on them: those ``dims`` are left out of the int8 product and multiplied
    in float32 with ``columns`` (the same columns of the bfloat16 weight, in float32). Each
    logit is then off the product of the int8 weight outside ``dims`` and ``columns`` on them
    by at most half an input step times the row's absolute int8 weights
    (:meth:`error_bound`), plus float32 rounding.
    """

    __slots__ = ("_packed", "columns", "dims", "kept", "rows", "scales", "zeros")

    def __init__(self, rows: Int8Rows, dims: torch.Tensor, columns: torch.Tensor) -> None:
        import torch

        self.rows = rows
        self.dims = dims
        self.columns = columns
        self.kept = torch.ones(int(rows.q.shape[1]))
        self.kept[dims] = 0.0
        self.scales = rows.scales.float()
        self.zeros = torch.zeros(int(rows.q.shape[0]), dtype=torch.int32)
        self._packed: Any = None

    @property
    def packed(self) -> Any:
        """oneDNN's layout of the int8 weight, made at the first product rather than at
        load, so that a generator loaded and never asked does not pay for it."""
        import torch

        if self._packed is None:
            self._packed = torch.ops.onednn.qlinear_prepack(self.rows.q, None)
        return self._packed

    def input_step(self, x: torch.Tensor) -> float:
        """The int8 step of the inputs ``x`` [M, K] outside ``dims``."""
        return _step(x.float() * self.kept)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` [M, K] (any float type) -> float32 [M, N]."""
        import torch

        x = x.float()
        outside = x * self.kept
        step = _step(outside)
        qx = torch.round(outside / step).add_(_INPUT_ZERO).to(torch.uint8)
        y: torch.Tensor = torch.ops.onednn.qlinear_pointwise(
            qx, step, _INPUT_ZERO, self.packed, self.scales, self.zeros, None, 1.0, 0,
            torch.float32, "none", [], "")
        return y.add_(torch.mm(self.columns, x[:, self.dims].t()).t())

    def error_bound(self, x: torch.Tensor) -> torch.Tensor:
        """[M, N]: how far each product may be from ``x`` times the int8 weight outside
        ``dims`` plus ``x`` times ``columns`` on them, before float rounding."""
        kept_weight = self.rows.dequantized().abs() * self.kept
        return 0.5 * self.input_step(x) * kept_weight.sum(dim=1).expand(x.shape[0], -1)

    @property
    def nbytes(self) -> int:
        """What a product reads: the int8 weight, its scales and the float32 columns."""
        return int(self.rows.q.numel() + 4 * self.scales.numel()
                   + 4 * self.columns.numel())


def _step(inputs: torch.Tensor) -> float:
    """One symmetric int8 step for all of ``inputs`` (never 0: all-zero inputs stay 0)."""
    return max(float(inputs.abs().amax()) / 127.0, 1e-30)


def outlier_dims(hidden: torch.Tensor, n: int) -> torch.Tensor:
    """The ``n`` dimensions of ``hidden`` [T, K] with the largest magnitude over its tokens,
    in increasing order (long)."""
    import torch

    top = hidden.float().abs().amax(dim=0).topk(min(n, int(hidden.shape[1]))).indices
    return torch.sort(top).values.to(torch.long)


@functools.cache
def int8_head_available() -> bool:
    """Whether :class:`Int8Head` runs here: oneDNN's int8 x int8 kernel in this torch build,
    on a CPU whose int8 sums are 32-bit (without VNNI they saturate at 16 bits,
    :func:`ragdesk.core.cpu.int8_weight_levels`); checked once on a small product."""
    import torch

    from ragdesk.core.cpu import cpu_has_int8_dot

    if not cpu_has_int8_dot():
        return False
    try:
        w = torch.full((4, 64), 127, dtype=torch.int8)
        x = torch.full((2, 64), 127 + _INPUT_ZERO, dtype=torch.uint8)
        packed = torch.ops.onednn.qlinear_prepack(w, None)
        got = torch.ops.onednn.qlinear_pointwise(
            x, 1.0, _INPUT_ZERO, packed, torch.ones(4), torch.zeros(4, dtype=torch.int32),
            None, 1.0, 0, torch.float32, "none", [], "")
        return bool(float(got[1, 3]) == 127.0 * 127.0 * 64)
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


def quantize_rows(weight: torch.Tensor) -> dict[str, torch.Tensor]:
    """``q`` (int8 [N, K]) and ``scales`` (bfloat16 [N]) of a weight for :class:`Int8Rows`:
    symmetric per row, ``scale = max|w| / 127``. Copies made here are stored for later
    processes under ragdesk's version (:mod:`ragdesk.core.models.weight_copies`): a change to
    this arithmetic, or to the order of fused weights, comes with a new version."""
    import torch

    w = weight.detach()
    q = torch.empty(w.shape, dtype=torch.int8)
    scales = torch.empty(w.shape[0], dtype=torch.bfloat16)
    # in blocks of rows (each row's scale and steps depend on that row alone): one pass over
    # the whole float32 matrix per operation reads and writes it from memory several times
    for i in range(0, w.shape[0], _QUANTIZE_ROWS):
        block = w[i:i + _QUANTIZE_ROWS].float()
        scale = (block.abs().amax(dim=1) / 127.0).clamp(min=1e-12).to(torch.bfloat16)
        scales[i:i + _QUANTIZE_ROWS] = scale
        # divided by the scale the kernel multiplies by (rounded to bfloat16)
        q[i:i + _QUANTIZE_ROWS] = block.div_(scale.float()[:, None]).round_().clamp_(-127, 127)
    return {"q": q, "scales": scales}


@functools.cache
def int8_rows_available() -> bool:
    """Whether this torch build multiplies bfloat16 by int8 rows on the CPU (checked once)."""
    import torch

    try:
        w = torch.ones((4, 32), dtype=torch.int8)
        got = torch._weight_int8pack_mm(torch.ones((1, 32), dtype=torch.bfloat16), w,
                                        torch.ones(4, dtype=torch.bfloat16))
        return bool(float(got[0, 0]) == 32.0)
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


def int8_prepack(weight: torch.Tensor, bias: torch.Tensor | None) -> Any:
    """Symmetric int8 per output channel (within :func:`int8_weight_levels`), packed for
    ``quantized.linear_dynamic``."""
    import torch

    from ragdesk.core.cpu import int8_weight_levels

    w = weight.float().contiguous()
    scales = (w.abs().amax(dim=1) / float(int8_weight_levels())).clamp(min=1e-12).double()
    zeros = torch.zeros(w.shape[0], dtype=torch.long)
    engine = torch.backends.quantized.engine
    # oneDNN packs about 2x faster than fbgemm (the x86 default: 262k x 640 output layer 1.3-1.6
    # s vs 2.6-3.3 s, measured on 2 loaded cores) and its products are as fast and equal to
    # 1e-6; packing is part of every start-up
    pack_with = "onednn" if "onednn" in torch.backends.quantized.supported_engines else engine
    with warnings.catch_warnings():  # quantized tensor creation is flagged as deprecated
        warnings.simplefilter("ignore")
        qw = torch.quantize_per_channel(w, scales, zeros, 0, torch.qint8)
        try:
            torch.backends.quantized.engine = pack_with
            return torch.ops.quantized.linear_prepack(
                qw, None if bias is None else bias.float().contiguous())
        finally:
            torch.backends.quantized.engine = engine
