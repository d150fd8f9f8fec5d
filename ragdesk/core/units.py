"""Numbers as people read them: counts with the right noun, durations, sizes, shares and
rates.

One copy for the CLI and the GUI, so "1 token", "46 min left" and "7.1 MB/s" read the same in
both.
"""

from __future__ import annotations

# Nouns whose plural is not the singular plus "s".
_IRREGULAR = {"passage": "passages", "entry": "entries", "query": "queries",
              "index": "indexes", "batch": "batches", "match": "matches"}


def plural(n: int | float, singular: str, plural_form: str | None = None) -> str:
    """``n`` and its noun: ``plural(1, "token")`` is "1 token", ``plural(12324, "passage")``
    "12,324 passages" (integers get thousands separators)."""
    word = singular if n == 1 else (plural_form or _IRREGULAR.get(singular, singular + "s"))
    shown = f"{n:,}" if isinstance(n, int) else f"{n:,g}"
    return f"{shown} {word}"


def fmt_seconds(s: float, compact: bool = False) -> str:
    """A duration rounded to the second, without zero tails: "45 s", "46 min", "1 min 05 s",
    "2 h", "2 h 05 min". ``compact`` is the terminal's form: "45s", "46m", "1m05s", "2h05m".
    Past an hour the seconds are noise and are dropped."""
    s = max(0, round(s))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    if compact:
        if h:
            return f"{h}h{m:02d}m" if m else f"{h}h"
        if m:
            return f"{m}m{sec:02d}s" if sec else f"{m}m"
        return f"{sec}s"
    if h:
        return f"{h} h {m:02d} min" if m else f"{h} h"
    if m:
        return f"{m} min {sec:02d} s" if sec else f"{m} min"
    return f"{sec} s"


_BYTE_UNITS = ("B", "KB", "MB", "GB", "TB")


def human_bytes(n: float | None, missing: str = "–") -> str:
    """Decimal multiples, as downloads, file managers and pip give sizes: "512 B", "7.1 MB",
    "1.1 GB" (1 GB = 10^9 bytes)."""
    if n is None:
        return missing
    for unit in _BYTE_UNITS:
        digits = 0 if unit == "B" else 1
        # decided on the number shown: 999,960 B is "1.0 MB", never "1000.0 KB"
        if round(abs(n), digits) < 1000 or unit == _BYTE_UNITS[-1]:
            return f"{n:.{digits}f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")  # the loop returns at the last unit


def shown_time(iso: str) -> str:
    """A stored timestamp (ISO 8601, UTC) as a person reads it: local time to the minute,
    "2026-12-04 14:16". Text that is not a timestamp is shown as it is."""
    from datetime import datetime

    try:
        when = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    return (when.astimezone() if when.tzinfo else when).strftime("%Y-%m-%d %H:%M")


def percent(fraction: float, digits: int = 0) -> str:
    """A share as every front end writes it: "60%", "28.4%" (``digits`` after the point),
    no space before the sign."""
    return f"{100 * fraction:.{digits}f}%"


def share_or_dash(fraction: float | None, digits: int = 1) -> str:
    """:func:`percent`, or "–" for a share that was not measured (never "0%" or "-%")."""
    return "–" if fraction is None else percent(fraction, digits)


def logprob_text(logprob: float) -> str:
    """The answer's log-probability as every front end labels it."""
    return f"log p(answer) = {logprob:.2f}"


def prior_text(prob: float) -> str:
    """A passage's retrieval probability p(z|x) as every front end labels it: "retrieval 95%"
    (the share of the retriever's belief over the passages read, not a confidence)."""
    # a passage the retriever all but ruled out is not "0%": it was read
    return f"retrieval {percent(prob)}" if prob >= 0.005 else "retrieval under 1%"


def human_rate(per_s: float, unit: str = "") -> str:
    """A rate: bytes per second as "6.8 MB/s"; other units as "51.0/s" or "51.0 passages/s"."""
    if unit == "bytes":
        return f"{human_bytes(per_s)}/s"
    return f"{per_s:,.1f} {unit}/s" if unit else f"{per_s:,.1f}/s"
