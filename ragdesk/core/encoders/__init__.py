"""Text encoders for passages and questions: DPR (CLS pooler) and sentence-transformers
style models (pooling and normalization read from the model folder).

Loading never uses ``trust_remote_code`` and reads safetensors only. The package by concern:
``identity`` (what a snapshot records of its encoder), ``folders`` (finding a model folder
and its family), ``st_layout`` (a sentence-transformers folder's modules), ``precision``
(float32 or bfloat16, per snapshot), ``runtime`` (:class:`TextEncoder`, :func:`load_encoder`)
and, re-exported, the fused BERT forward and the pooling it shares (:mod:`ragdesk.core.kernels`).
"""

from __future__ import annotations

from ragdesk.core.encoders.folders import detect_family, resolve_model_path
from ragdesk.core.encoders.identity import (
    DPR_FAMILY,
    ST_FAMILY,
    EncoderInfo,
    check_query_space,
    describe_encoder,
    stable_id,
)
from ragdesk.core.encoders.precision import (
    BFLOAT16,
    EXACT,
    FAST_ENV,
    FLOAT32,
    EncoderPrecision,
    as_computed,
    check_encoder_precision,
    chosen_precision,
    default_precision,
)
from ragdesk.core.encoders.runtime import (
    MODEL_INPUTS,
    TextEncoder,
    load_encoder,
    passage_input,
    passage_inputs,
    token_length_order,
)
from ragdesk.core.encoders.st_layout import (
    POOLINGS,
    Prompts,
    SentenceHead,
    StLayout,
    read_st_layout,
)
from ragdesk.core.kernels import FusedBertKernel, pool_tokens
from ragdesk.core.options import ENCODER_PRECISIONS

__all__ = [
    "BFLOAT16", "DPR_FAMILY", "ENCODER_PRECISIONS", "EXACT", "FAST_ENV", "FLOAT32", "MODEL_INPUTS",
    "POOLINGS", "ST_FAMILY", "EncoderInfo", "EncoderPrecision", "FusedBertKernel", "Prompts",
    "SentenceHead", "StLayout", "TextEncoder", "as_computed", "check_encoder_precision",
    "check_query_space", "chosen_precision", "default_precision", "describe_encoder",
    "detect_family", "load_encoder", "passage_input", "passage_inputs", "pool_tokens",
    "read_st_layout", "resolve_model_path", "stable_id", "token_length_order",
]
