"""Assemble the bench scripts' sections (and PNG plots in ``docs/plots/``) from
``bench/results`` into ``bench/results/report.md``: a draft to carry into ``docs/benchmarks.md``,
which also holds what no script writes (evaluations, profiles, what was tried and not kept)
and so is edited, never overwritten.

Each bench script writes ``bench/results/<name>.md`` (its section, starting with a ``#``
heading) and ``bench/results/<name>.json``. A JSON may carry plots for this report under the
key ``"plots"``: a list of ``{"file": "name.png", "title": str, "kind": "line" | "bar",
"x_label": str, "y_label": str, "x_log": bool, "series": {label: {"x": [...], "y": [...]}}}``.
The retrieval and encoding results are plotted from their own fields.

    python -m bench.report
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench import REPO, RESULTS_DIR

DOCS = REPO / "docs"
PLOTS = DOCS / "plots"
ORDER = ["engine", "causal", "index", "encoding", "retrieval", "startup"]  # others follow by name

HEADER = """# Benchmarks (the scripts' sections)

Assembled by `python -m bench.report` from `bench/results/` (each `bench/*.py` script writes
its own results; rerun a script, then the report). Every script runs a reference and ragdesk
in the same process on the same inputs, and notes the machine it ran on.
"""


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw(spec: dict[str, Any]) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=110)
    series = spec["series"]
    if spec.get("kind") == "bar":
        labels = list(series)
        values = [float(series[k]["y"][0]) for k in labels]
        bars = ax.bar(labels, values, color=["#7f7f7f", "#1f77b4", "#2ca02c", "#d62728"][
            :len(labels)])
        for b, v in zip(bars, values, strict=True):
            ax.annotate(f"{v:.3g}", (b.get_x() + b.get_width() / 2, v), ha="center",
                        va="bottom", fontsize=9)
    else:
        for label, s in series.items():
            ax.plot(s["x"], s["y"], marker="o", markersize=3, label=label)
        ax.legend(fontsize=8)
        if spec.get("x_log"):
            ax.set_xscale("log")
    ax.set_title(spec.get("title", ""), fontsize=10)
    ax.set_xlabel(spec.get("x_label", ""))
    ax.set_ylabel(spec.get("y_label", ""))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    PLOTS.mkdir(parents=True, exist_ok=True)
    out: Path = PLOTS / spec["file"]
    fig.savefig(out)
    plt.close(fig)
    return out


def retrieval_plots(r: dict[str, Any]) -> list[dict[str, Any]]:
    ks = [1, 5, 20, 100]
    held = r["held_out_answerable"]
    specs: list[dict[str, Any]] = [{
        "file": "retrieval-topk.png",
        "title": f"Top-k accuracy, held-out lines 1-1,000, answerable "
                 f"(n={r['answerable']['held_out']})",
        "kind": "line", "x_label": "k (passages)", "y_label": "top-k accuracy", "x_log": True,
        "series": {m: {"x": ks, "y": [v[str(k)] for k in ks]} for m, v in held.items()},
    }]
    ch = r["fusion_chosen"]
    series: dict[str, dict[str, list[float]]] = {}
    for g in r["grid_tune_answerable"]:
        if g["depth"] != ch["depth"]:
            continue
        s = series.setdefault(f"score fusion, {g['norm']}", {"x": [], "y": []})
        s["x"].append(g["weight"])
        s["y"].append(g["20"])
    xs = sorted({x for s in series.values() for x in s["x"]})
    tune = r["tune_answerable"]
    for name in ("dense", "hybrid (ragdesk)"):
        if name in tune and xs:
            series[name] = {"x": [xs[0], xs[-1]], "y": [tune[name]["20"]] * 2}
    specs.append({
        "file": "retrieval-tuning.png",
        "title": f"Tuning lines: top-20 of plain score fusion vs BM25 weight "
                 f"({ch['depth']} candidates each)",
        "kind": "line", "x_label": "weight of the normalized BM25 score",
        "y_label": "top-20 accuracy (tuning lines)", "series": series,
    })
    return specs


def encoding_plots(r: dict[str, Any]) -> list[dict[str, Any]]:
    return [{
        "file": "encoding-throughput.png",
        "title": f"Passage encoding, {r['model']} (ratio {r['ratio_best']:.2f}x)",
        "kind": "bar", "x_label": "", "y_label": "passages per second",
        "series": {"plain transformers loop": {"y": [r["reference_passages_per_s"]]},
                   "ragdesk": {"y": [r["ragdesk_passages_per_s"]]},
                   **({"proposed token sort": {"y": [r["token_sorted_passages_per_s"]]}}
                      if "token_sorted_passages_per_s" in r else {})},
    }]


BUILTIN_PLOTS = {"retrieval": retrieval_plots, "encoding": encoding_plots}


def build(results_dir: Path = RESULTS_DIR, out: Path = RESULTS_DIR / "report.md") -> Path:
    names = sorted({p.stem for p in results_dir.glob("*.md") if p.name != out.name} |
                   {p.stem for p in results_dir.glob("*.json")},
                   key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))
    parts = [HEADER]
    for name in names:
        md_path, json_path = results_dir / f"{name}.md", results_dir / f"{name}.json"
        section = md_path.read_text(encoding="utf-8").strip() if md_path.exists() else \
            f"# {name}\n\n(no markdown written)"
        # Each result file starts at "#"; inside the report it is a second-level section.
        section = "\n".join("#" + line if line.startswith("#") else line
                            for line in section.splitlines())
        specs: list[dict[str, Any]] = []
        if json_path.exists():
            data = json.loads(json_path.read_text(encoding="utf-8"))
            if name in BUILTIN_PLOTS:
                specs += BUILTIN_PLOTS[name](data)
            specs += list(data.get("plots") or [])
        for spec in specs:
            png = draw(spec)
            section += f"\n\n![{spec.get('title', png.stem)}](plots/{png.name})"
        parts.append(section)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n\n".join(parts).rstrip() + "\n", encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    out = build()
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
