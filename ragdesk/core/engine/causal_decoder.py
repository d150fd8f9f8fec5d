"""The lean decoder-only machinery for RAG: the arithmetic of a transformers causal LM
without its per-call bookkeeping, with the K prompts packed and the KV cache preallocated.
Each lean backend (:mod:`.gemma_decoder`, :mod:`.qwen2_decoder`) is a
:class:`LeanCausalDecoder` that says what its layers, norms, embeddings and rotary
embeddings are; everything else is here.

Why: transformers' forward over K left-padded prompts spends most of an answer in the
prefill (every padded position runs through every layer) and, per step, in the output layer
over a large vocabulary (``F.linear`` with a few rows runs a slower kernel than with one) and
in cache copies and per-layer bookkeeping (measurements: docs/benchmarks.md,
``bench/causal_bench.py``). Here:

* the K prompts are packed one after the other (no padding); their common token prefix (the
  instructions in front of the passage, when the prompt starts with them) runs once and every
  row attends to that one copy's keys and values; the opening is kept for the next question;
* the cache is one preallocated tensor per layer; a step writes one column, nothing is copied
  (rows of different prompt lengths leave a masked gap, positions stay exact);
* the output layer runs only on the rows that need logits, through the fastest kernel for few
  rows (:class:`.lean_parts.Linear`);
* ``precision="bfloat16"`` (the fast path where the CPU multiplies bfloat16 natively) keeps
  bfloat16 copies of the linear layers and the output layer, and int8 copies (one scale per
  row) that the decoding steps' products of a few rows read (the output layer's with int8
  inputs as well, where the CPU multiplies int8 pairs: :class:`.int8_kernels.Int8Head`), and
  keeps the keys, values and queries in bfloat16, so that attention runs the CPU's bfloat16
  kernel (a prompt's attention took a quarter of float32's time); norms, rotary embeddings,
  the residual stream and the softmax stay float32.
  ``precision="int8"``: int8 weights (per output channel) with dynamically quantized
  activations, faster still, with more answers that differ from float32's. Both reduced
  precisions are tested for agreement, the float32 path for equality with transformers.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from ragdesk.core.engine.int8_kernels import outlier_dims
from ragdesk.core.engine.lean_parts import KVState, Linear, WeightCopies
from ragdesk.core.options import check_precision

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

FAST_PRECISION = "bfloat16"


def default_precision() -> str:
    """bfloat16 where the CPU multiplies it natively: about 3x faster answers with the same
    exact match on the starter pack (docs/benchmarks.md); float32 elsewhere, where bf16 is
    emulated and slower."""
    from ragdesk.core.cpu import cpu_has_native_bf16

    return FAST_PRECISION if cpu_has_native_bf16() else "float32"


def architecture_of(model: object) -> str:
    """The transformers class a model computes as: its own, or the one a lean tree
    (:mod:`ragdesk.core.models.lean_causal_lm`) stands for."""
    return str(getattr(model, "lean_architecture", None) or type(model).__name__)


# The output layer's products of up to this many rows read its int8 copy (and the products of
# weights kept in 4 bits their 4-bit copies): the K = 5 rows of a RAG-Token step gain, more
# rows run faster in bfloat16 (measured in docs/benchmarks.md).
LM_HEAD_INT8_ROWS = 8
# Openings kept between prompts (see LeanCausalDecoder._remember_opening); a Qwen2 1.5B
# opening of 1,000 tokens holds 29 MB of keys and values in bfloat16.
KEPT_OPENINGS = 4


def int8_available() -> bool:
    """Whether this torch build has the dynamic int8 linear kernels (fbgemm / oneDNN)."""
    import torch

    try:
        return bool(hasattr(torch.ops.quantized, "linear_dynamic")
                    and set(torch.backends.quantized.supported_engines) & {"x86", "fbgemm"})
    except (AttributeError, RuntimeError):
        return False


class LeanCausalDecoder(ABC):
    """The weights of one decoder-only LM, read in place (float32) or copied (bfloat16,
    int8), and the packed prefill and decoding steps over them. A subclass says what the
    model's layers are: ``_make_layer`` returns an object with ``heads_qkv(h, heads,
    kv_heads, d)`` (the layer's queries, keys and values before the rotary embedding) and
    ``finish(h, att)`` (the residual stream after the layer)."""

    # Whether the output layer's few-row products quantize their inputs to int8 as well
    # (Int8Head) in bfloat16: chosen per model by the answers it gives (docs/benchmarks.md).
    int8_head_inputs: ClassVar[bool] = True

    def __init__(self, model: Any, precision: str = "float32", int8_rows: bool = True,
                 stored_copies: Mapping[str, torch.Tensor] | None = None) -> None:
        """``int8_rows``: in bfloat16, whether the products of a few rows (decoding steps)
        read int8 copies of the weights (where torch has the kernel). ``stored_copies``:
        the bfloat16 and int8 copies an earlier process made of these same weights (see
        :class:`WeightCopies`), taken instead of made again; ``copies.made`` holds this
        decoder's, by the same names."""
        check_precision(precision)
        cfg = model.config
        inner = model.model
        if precision == "int8" and (inner.embed_tokens.weight.device.type != "cpu"
                                    or not int8_available()):
            # the int8 kernels are fbgemm's / oneDNN's, for the CPU only
            log.warning("int8 generator weights need the CPU kernels of torch's quantized "
                        "ops; running in float32")
            precision = "float32"
        self.precision = precision
        # the int8 copies serve the CPU's memory-bound decoding steps (a GPU keeps bfloat16)
        self.int8_rows = int8_rows and inner.embed_tokens.weight.device.type == "cpu"
        self.heads = int(cfg.num_attention_heads)
        self.kv_heads = int(cfg.num_key_value_heads)
        self.head_dim = int(getattr(cfg, "head_dim", None)
                            or cfg.hidden_size // cfg.num_attention_heads)
        self.groups = self.heads // self.kv_heads
        self.scaling = self._scaling(cfg)
        self.window = int(getattr(cfg, "sliding_window", None) or 0)
        self.layer_types = list(getattr(cfg, "layer_types", None)
                                or ["full_attention"] * cfg.num_hidden_layers)
        self.rotary = inner.rotary_emb
        self.softcap = getattr(cfg, "final_logit_softcapping", None)
        self.vocab_size = int(model.lm_head.weight.shape[0])
        self._model = model
        self._params = list(model.parameters())
        # the last prompts' common openings under the weights taken, the newest last:
        # (tokens, [(k, v) per layer])
        self._openings: list[tuple[tuple[int, ...],
                                   list[tuple[torch.Tensor, torch.Tensor]]]] = []
        self.copies = WeightCopies(stored_copies)
        self._take_weights()

    @abstractmethod
    def _scaling(self, cfg: Any) -> float:
        """The queries' scale."""

    @abstractmethod
    def _make_layer(self, layer: Any, precision: str, sliding: bool,
                    copies: WeightCopies) -> Any:
        """The lean copy of one decoder layer (``heads_qkv`` and ``finish``), its copies of
        the weights taken from ``copies``."""

    @abstractmethod
    def _make_norm(self, norm: Any) -> Any:
        """The lean copy of the final norm: a callable on float32 hidden states."""

    @abstractmethod
    def _rope(self, positions: torch.Tensor, like: torch.Tensor
              ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """cos/sin [R, T, D] per layer type, from the model's own rotary module."""

    @abstractmethod
    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """The input embeddings of ``tokens``."""

    def _take_weights(self) -> None:
        """Read (float32) or copy (norm scales; bfloat16 and int8 weights) the model's
        weights, and remember their version: fine-tuning changes them in place, and a copy
        taken before would keep answering with the old ones."""
        self._copy_weights()
        if self.precision == "bfloat16" and self.int8_rows:
            # the output layer is half of what a decoding step reads: its products of the K
            # rows of a RAG-Token step read the int8 copy, with int8 inputs where the CPU
            # multiplies int8 pairs (the marginals still cover the whole vocabulary); the
            # layers' small matrices gain from an int8 copy only for one row. Weights the
            # file keeps in 4 bits are read in 4 bits for as many rows as the output layer's
            # copy (the file's own numbers, not a coarser approximation of them).
            for layer in self.layers:
                layer.add_few_row_copies(LM_HEAD_INT8_ROWS)
            self.lm_head.add_int4_groups(LM_HEAD_INT8_ROWS)
            if self.lm_head.groups is None:  # else the file's own 4 bits: no int8 copy
                if self.int8_head_inputs:
                    self.lm_head.add_int8_head(LM_HEAD_INT8_ROWS, self._large_dims)
                else:
                    self.lm_head.add_int8_rows(LM_HEAD_INT8_ROWS)
        self._taken = self._weights_version()
        self._openings = []  # computed with the weights before

    def _copy_weights(self) -> None:
        """The layers, norm, embedding and output layer, read or copied in ``precision``."""
        import torch

        model, precision = self._model, self.precision
        cfg, inner = model.config, model.model
        copies = self.copies
        self.embed = inner.embed_tokens.weight.detach()
        self.layers = [self._make_layer(layer, precision,
                                        self.layer_types[i] == "sliding_attention",
                                        copies.scope(f"layers.{i}"))
                       for i, layer in enumerate(inner.layers[:cfg.num_hidden_layers])]
        self.norm = self._make_norm(inner.norm)
        self.lm_head = Linear([model.lm_head.weight], [model.lm_head.bias], precision,
                              copies.scope("lm_head"))
        self.dtype = self.embed.dtype
        self.kv_dtype = torch.bfloat16 if precision == "bfloat16" else self.dtype

    def _large_dims(self, n: int) -> torch.Tensor:
        """The ``n`` dimensions where the final norm's output runs largest (see
        :class:`.int8_kernels.Int8Head`), seen on 64 token ids drawn with a fixed seed: they
        are the model's, large in every token whatever the text (compared with dims found
        on real prompts in docs/benchmarks.md), and a fixed draw makes them the same in
        every process."""
        import torch

        tokens = torch.randint(0, int(self.embed.shape[0]), (1, 64),
                               generator=torch.Generator().manual_seed(0))
        state = KVState.empty(1, len(self.layers), self.kv_heads, 64, self.head_dim,
                              self.kv_dtype)
        with torch.inference_mode():
            hidden = self.norm(self.forward(tokens, state))[0]
        return outlier_dims(hidden, n)

    def _follow_weights(self) -> None:
        if self._weights_version() != self._taken:
            log.info("the generator's weights changed in place: taking them again")
            self.copies = WeightCopies()  # no stored copy is of the changed weights
            self._take_weights()

    # -- pieces ----------------------------------------------------------------------

    def _masks(self, q_pos: torch.Tensor, k_pos: torch.Tensor,
               extra: torch.Tensor | None = None) -> dict[bool, torch.Tensor]:
        """Boolean attention masks [R, 1, T, C] (True: attend) for full and sliding layers.

        Causality comes from positions (a key is seen when its position is not after the
        query's), except where ``extra`` [R or 1, T, C] says more (a prefix tree)."""
        qp = q_pos[:, :, None]
        kp = k_pos[:, None, :]
        full = (kp >= 0) & (kp <= qp)
        if extra is not None:
            full = full & extra
        out = {False: full[:, None]}
        if self.window and "sliding_attention" in self.layer_types:
            out[True] = (full & (kp > qp - self.window))[:, None]
        else:
            out[True] = out[False]
        return out

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
        """q [R, H, T, D] against k/v [R, Hkv, C, D] with mask [R, 1, T, C]."""
        import torch.nn.functional as F

        r, h, t, d = q.shape
        if t == 1 and self.groups > 1:
            # one query per row: the heads that share a key head attend as one block of
            # queries, with no copies of the keys
            qg = q.view(r, self.kv_heads, self.groups, d)
            out = F.scaled_dot_product_attention(qg, k, v, attn_mask=mask,
                                                 scale=self.scaling)
            return out.reshape(r, h, 1, d)  # a copy only where the kernel strides it (CUDA)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scaling,
                                              enable_gqa=self.groups > 1)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Final norm and output layer of hidden states [..., d] -> float32 [..., V]."""
        import torch

        out = self.lm_head(self.norm(h)).float()
        if self.softcap is not None:
            out = torch.tanh(out / self.softcap) * self.softcap
        return out

    # -- decoding ---------------------------------------------------------------------

    def forward(self, tokens: torch.Tensor, state: KVState,
                positions: torch.Tensor | None = None,
                tree_mask: torch.Tensor | None = None,
                on_layer: Callable[[int, torch.Tensor], None] | None = None) -> torch.Tensor:
        """Feed ``tokens`` [R, T] after what ``state`` holds; returns hidden states [R, T, d]
        (before the final norm). ``positions`` [R, T] default to consecutive positions after
        each row's last; ``tree_mask`` [T, T] (True: attend) replaces causality among the new
        tokens (a prefix tree fed as one sequence); ``on_layer(i, h)``: sees the residual
        stream after layer ``i``."""
        import torch

        r, t = tokens.shape
        if positions is None:
            positions = state.next_position[:, None] + torch.arange(t, device=tokens.device)
        state.grow(t)
        start, end = state.length, state.length + t
        state.pos[:, start:end] = positions
        extra = None
        if tree_mask is not None:
            extra = torch.ones((1, t, end), dtype=torch.bool, device=tokens.device)
            extra[0, :, start:] = tree_mask
        masks = self._masks(positions, state.pos[:, :end], extra)
        h = self._embed(tokens)
        rope = self._rope(positions, h)
        q_dim, d = self.heads * self.head_dim, self.head_dim
        for i, layer in enumerate(self.layers):
            q, k, v = layer.heads_qkv(h, self.heads, self.kv_heads, d)
            cos, sin = rope[self.layer_types[i]]
            q, k = _apply_rope(q, k, cos, sin)
            q = q.to(self.kv_dtype)
            state.k[i][:, :, start:end] = k
            state.v[i][:, :, start:end] = v
            att = self._attend(q, state.k[i][:, :, :end], state.v[i][:, :, :end],
                               masks[layer.sliding])
            h = layer.finish(h, att.transpose(1, 2).reshape(r, t, q_dim))
            if on_layer is not None:
                on_layer(i, h)
        state.length = end
        state.next_position = positions[:, -1] + 1
        return h

    def prefill(self, prompts: Sequence[Sequence[int]], device: Any = None,
                extra: int = 0) -> tuple[KVState, torch.Tensor, int]:
        """Run the K prompts; returns the one-row-per-prompt state (room for ``extra`` more
        columns), the hidden state of every prompt's last token [K, d], and the length of the
        prefix they share (run once).

        The prompts' common prefix (all but at least one token of the shortest) runs as one
        row; the rest of every prompt is packed into one sequence for the linear layers, and
        attends, prompt by prompt, to the shared prefix and its own earlier tokens.
        """
        import torch

        self._follow_weights()
        k_rows = len(prompts)
        lens = [len(p) for p in prompts]
        if k_rows == 0 or min(lens) == 0:
            raise ValueError("every prompt needs at least one token")
        # One prompt (all passages read together) is its own opening: the next question's
        # reuses whatever start they share, the worked examples at least.
        shared = common_prefix_len(prompts) if k_rows > 1 else lens[0]
        shared = min(shared, min(lens) - 1)
        tails = [list(p[shared:]) for p in prompts]
        tail_lens = [len(x) for x in tails]
        width = shared + max(tail_lens)
        cap = width + max(0, extra)
        n_layers = len(self.layers)
        state = KVState.empty(k_rows, n_layers, self.kv_heads, cap, self.head_dim,
                              self.kv_dtype, device)
        ks, vs, pos = state.k, state.v, state.pos
        if shared:
            head = KVState([x[:1] for x in ks], [x[:1] for x in vs], pos[:1].clone(), 0,
                           torch.zeros(1, dtype=torch.long, device=device),
                           torch.zeros(1, dtype=torch.long))
            opening = tuple(int(t) for t in prompts[0][:shared])
            reused = self._reuse_opening(opening, head, device)
            if reused < shared:
                self.forward(torch.tensor([list(opening[reused:])], device=device), head)
            self._remember_opening(opening, head)
            for i in range(n_layers):  # every row reads the one computed copy
                ks[i][:, :, :shared] = ks[i][:1, :, :shared]
                vs[i][:, :, :shared] = vs[i][:1, :, :shared]
            pos[:, :shared] = torch.arange(shared, device=device)
        for z, n in enumerate(tail_lens):
            pos[z, shared:shared + n] = torch.arange(shared, shared + n, device=device)
        state.length = width
        state.next_position = torch.tensor(lens, dtype=torch.long, device=device)
        hidden = self._packed_tails(tails, shared, state)
        return state, hidden, shared

    def _reuse_opening(self, opening: tuple[int, ...], head: KVState, device: Any) -> int:
        """Fill ``head`` with the keys and values of the longest start of ``opening`` that
        one of the last prompts kept also began with; returns its length.

        Every question's K prompts open with the same instructions and worked examples (a few
        hundred tokens, see :mod:`.prompts`): their keys and values depend only on those tokens
        and their positions, so they are computed once per decoder, not once per question.
        """
        import torch

        here = [c for c in self._openings if c[1][0][0].device == torch.device(device or "cpu")]
        if not here:
            return 0
        tokens, kv = max(here, key=lambda c: common_prefix_len([c[0], opening]))
        n = common_prefix_len([tokens, opening])
        n = min(n, len(opening) - 1)  # the opening's last token runs anyway (cheap)
        if n <= 0:
            return 0
        for i, (k, v) in enumerate(kv):
            head.k[i][:, :, :n] = k[:, :, :n]
            head.v[i][:, :, :n] = v[:, :, :n]
        head.pos[:, :n] = torch.arange(n, device=head.pos.device)
        head.length = n
        head.next_position = torch.full_like(head.next_position, n)
        return n

    def read_answer(self, prompt: Sequence[int], answer: Sequence[int], tap: int,
                    device: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``answer`` teacher-forced after ``prompt``: the residual stream after layer ``tap``
        at each of its tokens [len(answer), d], and each token's log-probability under the
        plain model [len(answer)] (no decoding constraint). A kept opening's keys and values
        serve the prompt's start; this sequence is not kept as one."""
        import torch

        if not prompt or not answer:
            raise ValueError("the prompt and the answer need at least one token each")
        if not 0 <= tap < len(self.layers):
            raise ValueError(f"layer {tap} is not one of the decoder's {len(self.layers)}")
        self._follow_weights()
        state = KVState.empty(1, len(self.layers), self.kv_heads, len(prompt) + len(answer),
                              self.head_dim, self.kv_dtype, device)
        reused = self._reuse_opening(tuple(prompt), state, device)  # leaves >= 1 prompt token
        rest = [*prompt[reused:], *answer]
        n = len(answer)
        tapped: list[torch.Tensor] = []

        def keep(i: int, h: torch.Tensor) -> None:
            if i == tap:
                tapped.append(h[0, -n:])

        h = self.forward(torch.tensor([rest], dtype=torch.long, device=device), state,
                         on_layer=keep)
        lp = torch.log_softmax(self.logits(h[0, -n - 1:-1]).float(), dim=-1)
        ids = torch.tensor(answer, dtype=torch.long, device=lp.device)
        return tapped[0], lp.gather(-1, ids[:, None])[:, 0]

    def forget_opening(self) -> None:
        self._openings = []

    def _remember_opening(self, opening: tuple[int, ...], head: KVState) -> None:
        """Keep ``opening`` among the last :data:`KEPT_OPENINGS`: an answer read together and
        the same question's answer from memory open differently, and each question's prompts
        of either kind start with the same worked examples as the last one's."""
        n = len(opening)
        kv = [(k[:, :, :n].clone(), v[:, :, :n].clone()) for k, v in zip(head.k, head.v,
                                                                            strict=True)]
        self._openings = [*self._openings, (opening, kv)][-KEPT_OPENINGS:]

    def _weights_version(self) -> tuple[int, ...]:
        # torch counts in-place changes per tensor (an optimizer's step is one): every
        # parameter, since a step may leave the ones a sample would watch unchanged (frozen)
        return tuple(t._version for t in self._params)

    def _packed_tails(self, tails: list[list[int]], shared: int,
                      state: KVState) -> torch.Tensor:
        """The prompts after the shared prefix as one packed sequence; returns the hidden
        state of each prompt's last token [K, d]."""
        import torch

        dev = state.pos.device
        flat = torch.tensor([t for tail in tails for t in tail], dtype=torch.long, device=dev)
        n_tok = int(flat.numel())
        bounds: list[tuple[int, int]] = []
        at = 0
        for tail in tails:
            bounds.append((at, at + len(tail)))
            at += len(tail)
        positions = torch.cat([torch.arange(shared, shared + len(t), device=dev)
                               for t in tails])
        masks = []
        for z, (a, b) in enumerate(bounds):
            q_pos = positions[a:b][None]
            masks.append(self._masks(q_pos, state.pos[z:z + 1, :shared + b - a]))
        h = self._embed(flat)[None]  # [1, N, d]
        rope = self._rope(positions[None], h)
        q_dim, d = self.heads * self.head_dim, self.head_dim
        for i, layer in enumerate(self.layers):
            q, k, v = layer.heads_qkv(h, self.heads, self.kv_heads, d)
            cos, sin = rope[self.layer_types[i]]
            q, k = _apply_rope(q, k, cos, sin)
            q = q.to(self.kv_dtype)
            outs = []
            for z, (a, b) in enumerate(bounds):
                end = shared + b - a
                state.k[i][z, :, shared:end] = k[0, :, a:b]
                state.v[i][z, :, shared:end] = v[0, :, a:b]
                outs.append(self._attend(q[:, :, a:b], state.k[i][z:z + 1, :, :end],
                                         state.v[i][z:z + 1, :, :end],
                                         masks[z][layer.sliding]))
            att = torch.cat(outs, dim=2)  # [1, H, N, D]
            h = layer.finish(h, att.transpose(1, 2).reshape(1, n_tok, q_dim))
        last = torch.tensor([b - 1 for _, b in bounds], device=dev)
        return h[0].index_select(0, last)


def _apply_rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' ``apply_rotary_pos_emb`` (cos/sin [R, T, D], heads on dim 1)."""
    import torch

    cos, sin = cos[:, None], sin[:, None]

    def rot(x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    return q * cos + rot(q) * sin, k * cos + rot(k) * sin


def common_prefix_len(prompts: Sequence[Sequence[int]]) -> int:
    first = prompts[0]
    n = min(len(p) for p in prompts)
    for i in range(n):
        tok = first[i]
        if any(p[i] != tok for p in prompts[1:]):
            return i
    return n
