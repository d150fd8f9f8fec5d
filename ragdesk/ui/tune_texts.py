"""What the tune dialog writes: learning rates as the docs do, the held-out measure, the
training steps, the check of a questions file and a run's result."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragdesk.core.units import plural, share_or_dash

if TYPE_CHECKING:
    from ragdesk.core.progress import TrainingUpdate
    from ragdesk.ui.backend import QuestionCheck, TuneResult


def rate_text(r: float) -> str:
    """3e-05 as "3e-5", the way the docs and the command line write it."""
    mantissa, _, exponent = f"{r:.0e}".partition("e")
    return f"{mantissa}e{int(exponent)}"


def step_line(u: TrainingUpdate) -> str:
    """"Step 12 of 46 · loss 0.4321 · held-out top-5 28.4%", as far as it is known."""
    parts = []
    if u.total_steps:
        parts.append(f"Step {u.step:,} of {u.total_steps:,}")
    if u.loss is not None:
        parts.append(f"loss {u.loss:.4f}")
    if u.top_k is not None:
        parts.append(f"held-out top-{u.k} {share_or_dash(u.top_k)}")
    return "  ·  ".join(parts)


def check_text(check: QuestionCheck) -> str:
    return (f"{plural(check.questions, 'question')}; {check.answerable:,} "
            f"{'has' if check.answerable == 1 else 'have'} a gold answer in the top "
            f"{check.depth} passages of {check.snapshot} and can teach the retriever.")


def result_text(r: TuneResult) -> str:
    """The measure, and after a run without a gain that it had none: not read as success."""
    line = (f"Held-out top-{r.k} ({plural(r.held_out, 'question')}): "
            f"{share_or_dash(r.top_k_before)} → {share_or_dash(r.top_k_after)} after "
            f"{plural(r.steps, 'step')} on {plural(r.trained_on, 'question')}.")
    note = r.no_gain_note()
    return line if note is None else f"{line}<br><b>No gain.</b> {note}"
