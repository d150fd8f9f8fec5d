"""Benchmarks: each script runs a reference and ragdesk in the same process, prints ratios and
writes ``bench/results/<name>.json`` and ``bench/results/<name>.md``; ``python -m bench.report``
assembles ``docs/benchmarks.md``. Shared helpers live here."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parents[1]
NQ_DEV = REPO.parent / "shared" / "data" / "nq-open-dev.jsonl"
STARTER_PASSAGES = 12_324  # Vital Articles lead sections in 100-word passages


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """What the numbers were measured on (written next to every result)."""
    info: dict[str, Any] = {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"),
    }
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
    except ImportError:
        pass
    try:
        load1, _, _ = os.getloadavg()
        info["load_average_1min"] = round(load1, 2)
    except OSError:
        pass
    return info


def machine_line(m: dict[str, Any]) -> str:
    parts = [f"{m.get('cpu')}", f"{m.get('cores')} cores"]
    if "torch_threads" in m:
        parts.append(f"torch {m.get('torch')} with {m['torch_threads']} threads")
    if "load_average_1min" in m:
        parts.append(f"load average {m['load_average_1min']} at start")
    parts.append(str(m.get("date")))
    return "Machine: " + ", ".join(parts) + "."


def write_results(name: str, data: dict[str, Any], markdown: str) -> tuple[Path, Path]:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    jp = RESULTS_DIR / f"{name}.json"
    mp = RESULTS_DIR / f"{name}.md"
    jp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    mp.write_text(markdown.rstrip() + "\n", encoding="utf-8")
    return jp, mp


def starter_passages() -> list[tuple[str, str]]:
    """(title, text) of the Vital Articles extracts cut into non-overlapping 100-word passages,
    as DPR cut Wikipedia and as the starter snapshot holds them."""
    from ragdesk.core.testing.tiny_models import vital_articles_path

    data = json.loads(vital_articles_path().read_text(encoding="utf-8"))
    out: list[tuple[str, str]] = []
    for v in data.values():
        words = (v.get("extract") or "").split()
        for i in range(0, len(words), 100):
            out.append((v["title"], " ".join(words[i:i + 100])))
    return out


def md_table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)
