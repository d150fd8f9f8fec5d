"""Scale: N clustered 768-d vectors imported from shards and quantized to ivf-pq (issue 21).

For each N this

1. draws N vectors from a clustered distribution: 4,096 centres (Gaussian directions,
   unit length); a point is a centre chosen uniformly plus Gaussian noise of the same
   expected length (``NOISE`` = 1.0, so a point's cosine with its centre is about 0.71),
   L2-normalised and stored as float16. They are written in chunks of ``CHUNK`` rows into
   ``.npy`` + ``.ids.npy`` shards of ``SHARD_ROWS`` rows, ids shuffled within each shard, so
   generation holds one chunk at a time. Queries are 200 more points from the same
   distribution, not stored (held out);
2. writes a DPR TSV of N tiny passages ("passage i") and a randomly initialised one-layer
   DPR context encoder with 768 dimensions (import needs an encoder whose width matches the
   vectors; it never runs it when the vectors are given);
3. runs ``ragdesk index import TSV --embeddings SHARDS`` and ``ragdesk index quantize NAME
   --variant ivf-pq`` as subprocesses, and records each one's wall time, CPU time, peak RSS
   (``VmHWM`` from /proc/PID/status: the kernel's high-water mark, which counts the mapped
   pages of files too) and the peaks of its anonymous and file-backed parts (``RssAnon``,
   ``RssFile``, sampled every 0.1 s);
4. opens the ivf-pq variant and measures recall@20 of the held-out queries against exact
   search (FAISS IndexFlatIP over the stored float16 vectors, block by block) and the p50
   latency of single queries.

Results go to ``bench/out/scale/results-N.json``; ``--report`` writes the table and the RSS
plot (docs/plots/scale-rss.png) from all of them. The data is deleted after each N unless
``--keep``.

    python -m bench.scale_bench --n 1000000 [--n 2000000 ...] [--threads 2] [--report]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out" / "scale"
DIM = 768
CENTRES = 4096
NOISE = 1.0  # noise length relative to the centre's
CHUNK = 65_536
SHARD_ROWS = 250_000
QUERIES = 200
K = 20
SEED = 0


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


class Clusters:
    """The distribution: seeded centres; points drawn from any generator."""

    def __init__(self, seed: int = SEED) -> None:
        rng = np.random.default_rng(seed)
        c = rng.standard_normal((CENTRES, DIM), dtype=np.float32)
        self.centres = c / np.linalg.norm(c, axis=1, keepdims=True)

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        x = self.centres[rng.integers(0, CENTRES, n)]
        x += NOISE * rng.standard_normal((n, DIM), dtype=np.float32) / np.float32(np.sqrt(DIM))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        out: np.ndarray = x.astype(np.float16)
        return out


def write_shards(folder: Path, n: int, dist: Clusters) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED + 1)
    for k, start in enumerate(range(0, n, SHARD_ROWS)):
        rows = min(SHARD_ROWS, n - start)
        ids = start + rng.permutation(rows)
        np.save(folder / f"part-{k}.ids.npy", ids.astype(np.int64))
        out = np.lib.format.open_memmap(folder / f"part-{k}.npy", mode="w+",
                                        dtype=np.float16, shape=(rows, DIM))
        for s in range(0, rows, CHUNK):
            out[s:s + CHUNK] = dist.draw(rng, min(CHUNK, rows - s))
            out.flush()
        del out


def write_tsv(path: Path, n: int) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("id\ttext\ttitle\n")
        for s in range(0, n, CHUNK):
            fh.write("".join(f"{i + 1}\tpassage {i}\tP{i}\n" for i in range(s, min(n, s + CHUNK))))


def tiny_encoder(folder: Path) -> Path:
    """A one-layer DPR context encoder 768 wide: its config gives the snapshot's dim."""
    if (folder / "config.json").exists():
        return folder
    import torch
    from transformers import DPRConfig, DPRContextEncoder

    from ragdesk.core.testing.tiny_models import bert_tokenizer

    tok = bert_tokenizer()
    cfg = DPRConfig(vocab_size=len(tok), hidden_size=DIM, num_hidden_layers=1,
                    num_attention_heads=12, intermediate_size=64, projection_dim=0)
    torch.manual_seed(0)
    DPRContextEncoder(cfg).eval().save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _status_kb(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def run_measured(argv: list[str], env: dict[str, str], logs: Path) -> dict[str, Any]:
    """Run a command; its wall time, exit code, output, peak RSS and peak anonymous RSS."""
    out_path, err_path = logs.with_suffix(".out"), logs.with_suffix(".err")
    t0 = time.perf_counter()
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err)
    peak = {"VmHWM": 0, "RssAnon": 0, "RssFile": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for key in peak:
                peak[key] = max(peak[key], _status_kb(proc.pid, key))
            done.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    # VmHWM is read from /proc: wait4's ru_maxrss also counts the forked copy of this
    # process before the exec (Linux keeps the larger), which made a small child look as
    # big as the bench once the bench had grown.
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    sampler.join()
    return {"argv": argv[1:], "rc": proc.returncode,
            "wall_s": round(time.perf_counter() - t0, 1), "load_after": load_average(),
            "stdout": out_path.read_text(), "stderr": err_path.read_text()[-4000:],
            "peak_rss_mb": round(peak["VmHWM"] / 1024),
            "peak_anon_mb": round(peak["RssAnon"] / 1024),
            "peak_file_mb": round(peak["RssFile"] / 1024),
            "wait4_maxrss_mb": round(usage.ru_maxrss / 1024),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1)}


def ragdesk_cmd(data: Path, *args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from ragdesk.cli.main import main; "
            "sys.exit(main())", "--data-dir", str(data), *args]


def exact_reference(emb: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """Exact top-k ids: FAISS IndexFlatIP over float32 blocks of the stored vectors."""
    import faiss

    from ragdesk.core.pages import release_pages

    best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), 0), dtype=np.int64)
    for s in range(0, emb.shape[0], 262_144):
        block = np.asarray(emb[s:s + 262_144], dtype=np.float32)
        release_pages(emb, s, s + 262_144)
        flat = faiss.IndexFlatIP(emb.shape[1])
        flat.add(block)
        d, i = flat.search(queries, k)
        cs, ci = np.hstack([best_s, d]), np.hstack([best_i, i + s])
        order = np.argsort(-cs, axis=1, kind="stable")[:, :k]
        best_s, best_i = np.take_along_axis(cs, order, 1), np.take_along_axis(ci, order, 1)
    return best_i


CHEAP = {"nprobe": 16, "rerank": 100}  # a fixed setting, beside the one quantize tuned


def measure(index: Any, queries: np.ndarray, ref: np.ndarray) -> dict[str, Any]:
    """recall@20 of all queries at once, and the p50 of single queries on one thread."""
    import faiss

    from ragdesk.core.snapshots.faiss_variants import recall_at_k

    _, got = index.search_ids(queries, K)
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    times = []
    for q in queries:
        t0 = time.perf_counter()
        index.search_ids(q[None, :], K)
        times.append(time.perf_counter() - t0)
    faiss.omp_set_num_threads(threads)
    return {"recall_at_20": round(recall_at_k(got, ref, K), 4),
            "p50_ms": round(float(np.median(times)) * 1000, 2), "load": load_average()}


def evaluate(data_dir: Path, name: str, queries: np.ndarray) -> dict[str, Any]:
    """The held-out queries against exact search, at quantize's setting and at ``CHEAP``."""
    from ragdesk.core.catalog import Catalog
    from ragdesk.core.paths import DataDir
    from ragdesk.core.snapshots import open_snapshot
    from ragdesk.core.snapshots.faiss_variants import RerankSearcher, set_search_params

    data = DataDir(data_dir)
    index = open_snapshot(data, Catalog(data.catalog_path), name, "ivf-pq")
    try:
        ref = exact_reference(np.load(data.snapshot_dir(name) / "embeddings.npy",
                                      mmap_mode="r"), queries, K)
        out = {"tuned": measure(index, queries, ref), "resident_bytes": index.resident_bytes}
        searcher = index.searcher
        assert isinstance(searcher, RerankSearcher)
        set_search_params(searcher.index, "ivf-pq", CHEAP)
        searcher.candidates = CHEAP["rerank"]
        out["cheap"] = {**CHEAP, **measure(index, queries, ref)}
    finally:
        index.close()
    return out


def disk_usage(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.is_file()}


def run_one(n: int, threads: int, keep: bool, quantize_args: list[str]) -> dict[str, Any]:
    work = OUT / f"n{n}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    dist = Clusters()
    res: dict[str, Any] = {"n": n, "dim": DIM, "centres": CENTRES, "noise": NOISE,
                           "threads": threads, "load_before": load_average()}
    t0 = time.perf_counter()
    write_shards(work / "shards", n, dist)
    write_tsv(work / "passages.tsv", n)
    res["generate_s"] = round(time.perf_counter() - t0, 1)
    res["shards_bytes"] = sum(disk_usage(work / "shards").values())
    queries = dist.draw(np.random.default_rng(SEED + 2), QUERIES).astype(np.float32)
    encoder = tiny_encoder(OUT / "encoder-768")
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "false"}
    name, data = f"scale-{n}", work / "data"
    log(f"n={n:,}: generated in {res['generate_s']} s; importing (load {load_average()})")
    res["import"] = run_measured(ragdesk_cmd(data, "index", "import", str(work / "passages.tsv"),
                                             "--name", name, "--encoder", str(encoder),
                                             "--format", "dpr-tsv", "--embeddings",
                                             str(work / "shards")), env, work / "import")
    log(f"import: {summary(res['import'])}")
    if res["import"]["rc"] != 0:
        return res
    res["quantize"] = run_measured(ragdesk_cmd(data, "index", "quantize", name, "--variant",
                                               "ivf-pq", "--json", *quantize_args), env,
                                   work / "quantize")
    log(f"quantize: {summary(res['quantize'])}")
    if res["quantize"]["rc"] == 0:
        res["quantize"]["result"] = json.loads(res["quantize"]["stdout"])
        res["eval"] = evaluate(data, name, queries)
        res["snapshot_files"] = disk_usage(data.resolve() / "snapshots" / name)
        res["snapshot_bytes"] = folder_bytes(data.resolve() / "snapshots" / name)
        log(f"eval: {res['eval']}")
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return res


def summary(run: dict[str, Any]) -> str:
    return (f"rc {run['rc']}, {run['wall_s']} s wall, {run['cpu_s']} s CPU, peak RSS "
            f"{run['peak_rss_mb']} MB (anonymous {run['peak_anon_mb']} MB), load after "
            f"{run['load_after']}" + (f"\n{run['stderr'][-2000:]}" if run["rc"] else ""))


def load_results() -> list[dict[str, Any]]:
    rows = [json.loads(p.read_text()) for p in OUT.glob("results-*[0-9].json")]
    return sorted((r for r in rows if "eval" in r), key=lambda r: r["n"])


INTRO = """
# Scale: clustered 768-d vectors imported from shards and quantized (issue 21)

(written after the runs)
"""
OUTRO = """
"""


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def rss_plot(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A plot spec for bench.report: peak RSS against N."""
    ns = [r["n"] / 1e6 for r in rows]
    series = {}
    for step in ("import", "quantize"):
        series[f"{step}: peak RSS (VmHWM)"] = {
            "x": ns, "y": [r[step]["peak_rss_mb"] / 1024 for r in rows]}
        series[f"{step}: peak anonymous RSS"] = {
            "x": ns, "y": [r[step]["peak_anon_mb"] / 1024 for r in rows]}
    series["target: 4 GB"] = {"x": [ns[0], ns[-1]], "y": [4.0, 4.0]}
    return {"file": "scale-rss.png", "kind": "line",
            "title": "index import + quantize ivf-pq: peak memory against N (768-d float16)",
            "x_label": "vectors (millions)", "y_label": "GiB", "series": series}


def table(rows: list[dict[str, Any]]) -> list[str]:
    out = ["| N | import: wall s / CPU s; peak RSS / anon MB | quantize: wall s / CPU s; peak "
           "RSS / anon MB | build s (CPU-bound part) | setting quantize chose | recall@20 "
           "held-out (quantize's own) | p50 ms | fixed nprobe=16, rerank=100: recall@20, "
           "p50 ms | load 1/5/15 after import; after quantize |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        imp, q, res, ev = r["import"], r["quantize"], r["quantize"]["result"], r["eval"]
        p = res["params"]
        out.append(
            f"| {r['n']:,} | {imp['wall_s']:.0f} / {imp['cpu_s']:.0f}; {imp['peak_rss_mb']:,} / "
            f"{imp['peak_anon_mb']:,} | {q['wall_s']:.0f} / {q['cpu_s']:.0f}; "
            f"{q['peak_rss_mb']:,} / {q['peak_anon_mb']:,} | {res['build_s']:.0f} | "
            f"nlist={p['nlist']}, m={p['m']}, nprobe={p['nprobe']}, rerank={p['rerank']} | "
            f"{ev['tuned']['recall_at_20']:.3f} ({res['recall_at_20']:.3f}) | "
            f"{ev['tuned']['p50_ms']} | {ev['cheap']['recall_at_20']:.3f}, "
            f"{ev['cheap']['p50_ms']} | {imp['load_after']}; {q['load_after']} |")
    return out


def extrapolation(rows: list[dict[str, Any]]) -> list[str]:
    """Bytes per passage at the largest N, and what 21M passages would take."""
    big = rows[-1]
    n, wiki = big["n"], 21_015_300
    files = big["snapshot_files"]
    total = big.get("snapshot_bytes", sum(files.values()))  # older results: top level only
    index_b = big["quantize"]["result"]["bytes"] / n
    anon = [(r["n"], r["quantize"]["peak_anon_mb"]) for r in rows]
    slope = (anon[-1][1] - anon[0][1]) / max(1, anon[-1][0] - anon[0][0]) * 2**20
    base = anon[0][1] * 2**20 - slope * anon[0][0]

    def gb(x: float) -> str:
        return f"{x / 1e9:.1f} GB"

    return [
        f"| part | bytes per passage (measured at N = {n:,}) | 21,015,300 passages |",
        "|---|---|---|",
        f"| `embeddings.npy` on disk (float16) | {files['embeddings.npy'] / n:,.0f} | "
        f"{gb(files['embeddings.npy'] / n * wiki)} |",
        f"| ivf-pq index file = resident when searching | {index_b:.1f} | "
        f"{gb(index_b * wiki)} |",
        f"| whole snapshot folder on disk (synthetic 2-word passages) | "
        f"{total / n:,.0f} | {gb(total / n * wiki)} (plus about "
        "700 B per 100-word passage of text in `passages.sqlite`) |",
        f"| quantize's peak anonymous memory: slope between N = {anon[0][0]:,} and {n:,} | "
        f"{slope:.0f} | {gb(base + slope * wiki)} (the line through the measured points) |",
    ]


def report() -> str:
    """Write bench/results/scale.md and scale.json (bench.report assembles the docs)."""
    rows = load_results()
    results = REPO / "bench" / "results"
    slim = [{k: ({kk: vv for kk, vv in v.items() if kk not in ("stdout", "stderr")}
                 if isinstance(v, dict) else v) for k, v in r.items()} for r in rows]
    (results / "scale.json").write_text(json.dumps({"runs": slim, "plots": [rss_plot(rows)]},
                                                   indent=1), encoding="utf-8")
    md = "\n".join([INTRO.strip(), "", *table(rows), "",
                     "### Extrapolation to DPR's 21M passages", "", *extrapolation(rows), "",
                     OUTRO.strip(), ""])
    (results / "scale.md").write_text(md, encoding="utf-8")
    return md


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, action="append", default=[])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="keep the shards and the snapshot")
    ap.add_argument("--quantize-arg", action="append", default=[],
                    help="extra argument for `index quantize` (e.g. --quantize-arg=--m=128)")
    ap.add_argument("--tag", default="", help="suffix of the results file")
    ap.add_argument("--report", action="store_true",
                    help="write bench/results/scale.md and .json from every results file "
                    "(then `python -m bench.report` puts them in docs/benchmarks.md)")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    for n in args.n:
        res = run_one(n, args.threads, args.keep, args.quantize_arg)
        (OUT / f"results-{n}{args.tag}.json").write_text(json.dumps(res, indent=1))
    if args.report:
        print(report())


if __name__ == "__main__":
    main()
