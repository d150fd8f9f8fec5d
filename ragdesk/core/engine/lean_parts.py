"""The parts of the lean decoder-only decoders (:mod:`.causal_decoder`, :mod:`.gemma_decoder`,
:mod:`.qwen2_decoder`): the linear layers (one product kernel per precision), the projections
every such decoder layer holds (q|k|v, o, gate|up, down; fused where the weights are copied
anyway) and the preallocated KV cache.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ragdesk.core.engine.int4_kernels import (
    GROUP,
    Int4Groups,
    NotOnAGrid,
    holds_in_4_bits,
    int4_groups_available,
    quantize_groups,
)
from ragdesk.core.engine.int4_kernels import fits as int4_fits
from ragdesk.core.engine.int8_kernels import (
    HEAD_OUTLIER_DIMS,
    Int8Head,
    Int8Rows,
    int8_head_available,
    int8_prepack,
    int8_rows_available,
    quantize_rows,
)

if TYPE_CHECKING:
    import torch


# float32 weights larger than this run the few rows of a decoding step as (W @ x.T).T: MKL's
# sgemm with 2-20 rows costs about 3x one row on the output layer (262k x 640), the
# transposed product streams W once (measured: 5 rows 55 ms vs 157 ms). On the small
# per-layer matrices both cost the same in float32, so they keep F.linear. In bfloat16 the
# transposed product was the faster one for every matrix of the decoders where measured
# (oneDNN on an Intel Xeon with AMX: about half the time for 2-48 rows, docs/benchmarks.md),
# so all of them take it.
_MM_TRICK_MIN_ELEMENTS = 8 * 1024 * 1024
_MM_TRICK_MAX_ROWS = 32

# the scopes of a linear layer's copies besides its bfloat16 weight: the int8 rows, the
# output layer's int8 head (its large input dims and their columns) and the 4-bit groups
ROWS_SCOPE = "rows"
HEAD_SCOPE = "head"
GROUPS_SCOPE = "groups"


def keeping_order(name: str) -> int:
    """How the copy called ``name`` is made, the kinds most worth keeping on disk first
    (where a file cannot hold them all): 0, found by running the model (the output layer's
    large dims: a few MB, a pass of the model); 1, quantized (int8 rows and 4-bit groups: a
    half and a quarter of a weight's bytes, the slowest to make per byte); 2, converted
    (bfloat16 weights: a weight's size, the fastest per byte). Measured in
    docs/benchmarks.md."""
    wrapped = f".{name}"
    if f".{HEAD_SCOPE}." in wrapped:
        return 0
    if f".{ROWS_SCOPE}." in wrapped or f".{GROUPS_SCOPE}." in wrapped:
        return 1
    return 2


class WeightCopies:
    """The copies the lean decoders make of a model's weights (bfloat16 weights, int8 rows),
    by name ("layers.3.qkv.weight"): taken from ``stored`` (an earlier process's, read back
    from a file: :mod:`ragdesk.core.models.weight_copies`) where it holds one of the expected
    shape and type, made otherwise. ``made`` gathers every copy by name (taken or made), for
    writing that file; ``missed`` counts the copies that had to be made."""

    __slots__ = ("_prefix", "_shared", "_stored")

    def __init__(self, stored: Mapping[str, torch.Tensor] | None = None) -> None:
        self._stored: Mapping[str, torch.Tensor] = stored or {}
        self._prefix = ""
        # made copies and the miss count, one of each for a store and all its scopes
        self._shared: tuple[dict[str, torch.Tensor], list[int]] = ({}, [0])

    @property
    def made(self) -> dict[str, torch.Tensor]:
        return self._shared[0]

    @property
    def missed(self) -> int:
        return self._shared[1][0]

    def scope(self, name: str) -> WeightCopies:
        """The same store, its names under ``name.``."""
        sub = WeightCopies(self._stored)
        sub._prefix, sub._shared = f"{self._prefix}{name}.", self._shared
        return sub

    def take(self, wanted: Mapping[str, tuple[tuple[int, ...], torch.dtype]],
             make: Callable[[], dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        """The parts named in ``wanted`` (name -> (shape, dtype)): all stored ones where
        every part is stored as wanted, else ``make()``'s."""
        names = {part: self._prefix + part for part in wanted}
        stored = {part: self._stored.get(name) for part, name in names.items()}
        got: dict[str, torch.Tensor]
        if all(t is not None and tuple(t.shape) == shape and t.dtype == dtype
               for t, (shape, dtype) in zip(stored.values(), wanted.values(), strict=True)):
            got = {part: t for part, t in stored.items() if t is not None}
        else:
            got = make()
            self._shared[1][0] += 1
        for part, name in names.items():
            self.made[name] = got[part]
        return got


class Linear:
    """``x @ W.T (+ b)`` in float32, or with int8 weights and dynamically quantized inputs;
    in bfloat16 optionally with a 4-bit copy (:meth:`add_int4_groups`) or an int8 copy
    (:meth:`add_int8_rows`) of the weight as well, which the products of a few rows read."""

    __slots__ = ("bias", "copies", "groups", "groups_up_to", "out_features", "packed", "parts",
                 "rows", "rows_up_to", "transposed", "weight")

    def __init__(self, weights: Sequence[Any], biases: Sequence[Any] | None,
                 precision: str, copies: WeightCopies | None = None) -> None:
        """``copies``: where the bfloat16 and int8 copies come from (see
        :class:`WeightCopies`), under this layer's name; made here without one."""
        import torch

        bias_parts = (biases if biases is not None and all(b is not None for b in biases)
                      else None)
        shape = (sum(int(w.shape[0]) for w in weights), int(weights[0].shape[1]))
        self.out_features = shape[0]
        self.transposed = shape[0] * shape[1] >= _MM_TRICK_MIN_ELEMENTS
        self.packed: Any = None
        self.weight: torch.Tensor | None = None
        self.bias: torch.Tensor | None = None
        self.rows: Int8Rows | Int8Head | None = None
        self.rows_up_to = 0
        self.groups: Int4Groups | None = None
        self.groups_up_to = 0
        # the model's own weights, which a 4-bit copy is made from (never copied here)
        self.parts: tuple[Any, ...] = tuple(weights) if precision == "bfloat16" else ()
        self.copies = copies or WeightCopies()
        # q|k|v and gate|up fused into one product (new memory: not in float32)
        if precision == "int8":
            self.packed = int8_prepack(_fused(weights),
                                       None if bias_parts is None else _fused(bias_parts))
        elif precision == "bfloat16":
            bf16 = torch.bfloat16
            wanted: dict[str, tuple[tuple[int, ...], torch.dtype]] = {"weight": (shape, bf16)}
            if bias_parts is not None:
                wanted["bias"] = ((shape[0],), bf16)
            got = self.copies.take(wanted, lambda: {
                "weight": _fused(weights, bf16),
                **({} if bias_parts is None else {"bias": _fused(bias_parts, bf16)})})
            self.weight, self.bias = got["weight"], got.get("bias")
        else:
            self.weight = _fused(weights)
            self.bias = None if bias_parts is None else _fused(bias_parts)

    def add_int8_rows(self, up_to: int) -> None:
        """Let products of up to ``up_to`` rows read an int8 copy of the bfloat16 weight (half
        the bytes; where torch has the kernel): above a few rows the int8 kernel falls behind
        the bfloat16 product, which keeps the rest (measured in docs/benchmarks.md)."""
        import torch

        weight = self.weight
        if weight is not None and weight.dtype == torch.bfloat16 and int8_rows_available():
            n, k = int(weight.shape[0]), int(weight.shape[1])
            got = self.copies.scope(ROWS_SCOPE).take(
                {"q": ((n, k), torch.int8), "scales": ((n,), torch.bfloat16)},
                lambda: quantize_rows(weight))
            self.rows = Int8Rows(got["q"], got["scales"])
            self.rows_up_to = up_to

    def add_int4_groups(self, up_to: int) -> None:
        """Let products of up to ``up_to`` rows read a 4-bit copy of the weight (a quarter of
        the bfloat16 weight's bytes) where the model's weights are on a 4-bit grid, as a
        file's Q4_K blocks leave them (:mod:`.int4_kernels`), torch has the kernel and it
        takes the weight's shape. Whether they are is kept with the copies, so that a later
        start does not look again."""
        import torch

        weight, parts = self.weight, self.parts
        if (weight is None or weight.dtype != torch.bfloat16 or not parts
                or not int4_fits(weight) or not int4_groups_available()):
            return
        copies = self.copies.scope(GROUPS_SCOPE)
        on_grid = copies.take({"on_grid": ((1,), torch.uint8)}, lambda: {
            "on_grid": torch.tensor([holds_in_4_bits(parts)], dtype=torch.uint8)})
        if not int(on_grid["on_grid"][0]):
            return
        n, k = int(weight.shape[0]), int(weight.shape[1])
        try:
            got = copies.take({"packed": ((n, k // 2), torch.uint8),
                               "scales_zeros": ((k // GROUP, n, 2), torch.bfloat16)},
                              lambda: quantize_groups(_fused(parts, torch.float32)))
        except NotOnAGrid:  # in rows the first look skipped
            return
        self.groups = Int4Groups(got["packed"], got["scales_zeros"])
        self.groups_up_to = up_to

    def add_int8_head(self, up_to: int,
                      find_dims: Callable[[int], torch.Tensor]) -> None:
        """:meth:`add_int8_rows`, with the inputs in int8 as well where that kernel runs
        (:class:`Int8Head`). ``find_dims(n)``: the ``n`` input dimensions that run largest,
        asked only where no stored copy holds them."""
        import torch

        self.add_int8_rows(up_to)
        weight, rows = self.weight, self.rows
        if weight is None or not isinstance(rows, Int8Rows) or not int8_head_available():
            return
        n_out, k = int(weight.shape[0]), int(weight.shape[1])
        n = min(HEAD_OUTLIER_DIMS, k // 8)

        def make() -> dict[str, torch.Tensor]:
            dims = find_dims(n)
            return {"dims": dims, "columns": weight[:, dims].float()}

        got = self.copies.scope(HEAD_SCOPE).take(
            {"dims": ((n,), torch.long), "columns": ((n_out, n), torch.float32)}, make)
        self.rows = Int8Head(rows, got["dims"], got["columns"])

    def copy_for(self, rows: int) -> Int4Groups | Int8Rows | Int8Head | None:
        """The copy a product of ``rows`` rows reads (None: the weight itself)."""
        if self.groups is not None and rows <= self.groups_up_to:
            return self.groups
        if self.rows is not None and rows <= self.rows_up_to:
            return self.rows
        return None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        import torch
        import torch.nn.functional as F

        lead = x.shape[:-1]
        flat = x.reshape(-1, x.shape[-1])
        y: torch.Tensor
        if self.weight is None:
            y = torch.ops.quantized.linear_dynamic(flat, self.packed, reduce_range=False)
        elif (copy := self.copy_for(int(flat.shape[0]))) is not None:
            y = copy(flat)
            y = (y if self.bias is None else y + self.bias).float()
        elif self.weight.dtype != torch.float32:  # bfloat16 weights: float32 results
            x = flat.to(self.weight.dtype)  # attention's outputs are bfloat16 already
            if 1 < x.shape[0] <= _MM_TRICK_MAX_ROWS:
                y = _few_rows(self.weight, x)
                y = (y if self.bias is None else y + self.bias).float()
            else:
                y = F.linear(x, self.weight, self.bias).float()
        elif self.transposed and 1 < flat.shape[0] <= _MM_TRICK_MAX_ROWS:
            y = _few_rows(self.weight, flat)
            if self.bias is not None:
                y = y + self.bias
        else:
            y = F.linear(flat, self.weight, self.bias)
        return y.reshape(*lead, self.out_features)


def _fused(parts: Sequence[Any], dtype: torch.dtype | None = None) -> torch.Tensor:
    """``torch.cat(parts).to(dtype)`` (``dtype``: the parts' own by default) in one pass: each
    part converted straight into its rows of the result (a concatenation first would be a
    second pass over the layer's weights); a single part already of ``dtype`` is that part
    itself, as ``to`` returns it (float32 layers read the model's weights in place)."""
    import torch

    first = parts[0]
    dtype = dtype or first.dtype
    if len(parts) == 1 and first.dtype == dtype:
        same: torch.Tensor = first.detach()
        return same
    out = torch.empty((sum(int(p.shape[0]) for p in parts), *first.shape[1:]), dtype=dtype,
                      device=first.device)
    row = 0
    for p in parts:
        out[row:row + int(p.shape[0])].copy_(p.detach())
        row += int(p.shape[0])
    return out


def _few_rows(weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``x @ W.T`` for a few rows as ``(W @ x.T).T``, laid out as F.linear's: what reads the
    result (attention, log-softmax over the vocabulary) slows down several times on the
    transposed view (SDPA leaves its fused kernel)."""
    import torch

    return torch.mm(weight, x.t()).t().contiguous()


class Projections:
    """A decoder layer's attention and MLP projections. In float32 they read the model's
    weights in place (one product each); any other precision copies them, so q|k|v and
    gate|up are fused into one product each."""

    __slots__ = ("down", "gate_up", "o", "qkv", "sliding")

    def __init__(self, layer: Any, precision: str, sliding: bool,
                 copies: WeightCopies | None = None) -> None:
        """``copies``: the layer's scope of the decoder's :class:`WeightCopies`."""
        att, mlp = layer.self_attn, layer.mlp
        copies = copies or WeightCopies()
        if precision != "float32":
            self.qkv = [Linear([att.q_proj.weight, att.k_proj.weight, att.v_proj.weight],
                               [att.q_proj.bias, att.k_proj.bias, att.v_proj.bias],
                               precision, copies.scope("qkv"))]
            self.gate_up = [Linear([mlp.gate_proj.weight, mlp.up_proj.weight], None,
                                   precision, copies.scope("gate_up"))]
        else:
            self.qkv = [Linear([p.weight], [p.bias], precision)
                        for p in (att.q_proj, att.k_proj, att.v_proj)]
            self.gate_up = [Linear([p.weight], None, precision)
                            for p in (mlp.gate_proj, mlp.up_proj)]
        self.o = Linear([att.o_proj.weight], [att.o_proj.bias], precision, copies.scope("o"))
        self.down = Linear([mlp.down_proj.weight], None, precision, copies.scope("down"))
        self.sliding = sliding

    def project(self, h: torch.Tensor, q_dim: int, kv_dim: int
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values of ``h`` [..., d], heads not yet split."""
        if len(self.qkv) == 1:
            qkv = self.qkv[0](h)
            return (qkv[..., :q_dim], qkv[..., q_dim:q_dim + kv_dim],
                    qkv[..., q_dim + kv_dim:])
        return self.qkv[0](h), self.qkv[1](h), self.qkv[2](h)

    def gate_and_up(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The MLP's gate and up projections of ``h``."""
        if len(self.gate_up) == 1:
            gu = self.gate_up[0](h)
            half = gu.shape[-1] // 2
            return gu[..., :half], gu[..., half:]
        return self.gate_up[0](h), self.gate_up[1](h)

    def add_few_row_copies(self, up_to: int) -> None:
        """Copies for the products of a few rows: 4-bit ones for up to ``up_to`` rows where
        the weights are on a 4-bit grid (:meth:`Linear.add_int4_groups`), else int8 rows for
        one row (:meth:`Linear.add_int8_rows`; above one row they fall behind the bfloat16
        product)."""
        for lin in (*self.qkv, *self.gate_up, self.o, self.down):
            lin.add_int4_groups(up_to)
            if lin.groups is None:
                lin.add_int8_rows(1)


class KVState:
    """Preallocated keys/values of R rows for every layer, and the position of every column.

    Column c of row r holds the token at position ``pos[r, c]`` (-1: empty). Rows whose
    prompts are shorter than the longest leave a gap of empty columns before the generated
    tokens, which all rows write at the same column.
    """

    def __init__(self, k: list[torch.Tensor], v: list[torch.Tensor], pos: torch.Tensor,
                 length: int, next_position: torch.Tensor, passage_of_row: torch.Tensor) -> None:
        self.k = k
        self.v = v
        self.pos = pos  # [R, capacity] long
        self.length = length  # columns in use
        self.next_position = next_position  # [R] long: position of each row's next token
        self.passage_of_row = passage_of_row

    @classmethod
    def empty(cls, rows: int, layers: int, kv_heads: int, capacity: int, head_dim: int,
              dtype: torch.dtype, device: Any = None) -> KVState:
        """``rows`` rows of ``capacity`` empty columns each (row r reads passage r). Zeros,
        not uninitialized memory: the gap of a shorter prompt is masked, but attention
        multiplies its values by a zero weight, and garbage NaNs there would survive that."""
        import torch

        shape = (rows, kv_heads, capacity, head_dim)
        return cls([torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)],
                   [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)],
                   torch.full((rows, capacity), -1, dtype=torch.long, device=device), 0,
                   torch.zeros(rows, dtype=torch.long, device=device), torch.arange(rows))

    @property
    def capacity(self) -> int:
        return int(self.pos.shape[1])

    def expand(self, passage_of_row: torch.Tensor, extra: int) -> KVState:
        """A new state whose row r copies row ``passage_of_row[r]`` of this one (the one row
        per passage state after the prefill), with room for ``extra`` more columns."""
        import torch

        n = self.length
        idx = passage_of_row.to(self.pos.device)
        cap = n + max(0, extra)
        ks, vs = [], []
        for k, v in zip(self.k, self.v, strict=True):
            shape = (idx.numel(), k.shape[1], cap, k.shape[3])
            kc, vc = k.new_empty(shape), v.new_empty(shape)
            kc[:, :, :n] = k[:, :, :n].index_select(0, idx)
            vc[:, :, :n] = v[:, :, :n].index_select(0, idx)
            ks.append(kc)
            vs.append(vc)
        pos = torch.full((idx.numel(), cap), -1, dtype=torch.long, device=self.pos.device)
        pos[:, :n] = self.pos[:, :n].index_select(0, idx)
        return KVState(ks, vs, pos, n, self.next_position.index_select(0, idx),
                       passage_of_row.clone())

    def reorder(self, order: torch.Tensor) -> None:
        """Row i continues previous row order[i] (beam search): one gather per layer."""
        idx = order.to(self.pos.device)
        n = self.length
        for i in range(len(self.k)):
            self.k[i][:, :, :n] = self.k[i][:, :, :n].index_select(0, idx)
            self.v[i][:, :, :n] = self.v[i][:, :, :n].index_select(0, idx)
        self.pos = self.pos.index_select(0, idx)
        self.next_position = self.next_position.index_select(0, idx)
        self.passage_of_row = self.passage_of_row.index_select(0, order)

    def grow(self, t: int) -> None:
        """Make room for ``t`` more columns (rare: only past the planned capacity)."""
        import torch

        need = self.length + t - self.capacity
        if need <= 0:
            return
        need = max(need, 16)
        for i in range(len(self.k)):
            k, v = self.k[i], self.v[i]
            self.k[i] = torch.cat([k, k.new_empty(*k.shape[:2], need, k.shape[3])], dim=2)
            self.v[i] = torch.cat([v, v.new_empty(*v.shape[:2], need, v.shape[3])], dim=2)
        self.pos = torch.cat([self.pos, self.pos.new_full((self.pos.shape[0], need), -1)], 1)
