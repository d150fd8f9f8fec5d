"""Hand-fused forwards for the models ragdesk runs most: ``bert`` (:class:`FusedBertKernel`,
bulk passage encoding in bfloat16) and ``pooling`` (token vectors into one vector per text,
shared by the transformers forward, the kernel and training). They read model weights and
torch only, never the encoders that choose them; importing this package loads no ML
library."""

from ragdesk.core.kernels.bert import FusedBertKernel
from ragdesk.core.kernels.pooling import pool_tokens

__all__ = ["FusedBertKernel", "pool_tokens"]
