"""The first minute of a new user, and the encoder that makes the rest of the setup short.

One process, a fresh temporary data directory:

1. **Setup timeline.** ``ensure_starter_snapshot`` (what ``ragdesk models setup-starter`` and
   the app's Start button run) in a worker thread, from the first line: seconds until it can
   answer (the passages' BM25 stage and the converted generator), until the first question
   is answered (engine loaded in the main thread, the answer generated while the dense
   vectors are being encoded, with the retriever the app then uses: BM25), and until the
   dense index is finished.
2. **Encoding throughput.** Today's encoder (the transformers forward in float32, as every
   import ran it) against the fused kernel imports now use (``TextEncoder.fast``), on the
   same tokenized starter passages in the same process, alternating batch by batch so that
   a busy machine slows both alike; cosine of every vector to float32.
3. **Retrieval quality.** Top-20 accuracy on the answerable NQ-open dev questions with the
   vectors of both encoders over all 12,324 passages (questions are always encoded exactly):
   the new ones from step 1, today's from ``--reference-data-dir`` (a data directory whose
   ``vital-articles`` snapshot today's encoder built, read-only; its passages must have the
   same checksum) or encoded here with ``--encode-reference`` (slow).

    python -m bench.first_run_bench [--reference-data-dir DIR | --encode-reference]
                                    [--sample 512] [--question Q] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import NQ_DEV, machine, machine_line, md_table, write_results

TARGET_FIRST_ANSWER_S = 60.0
TARGET_RATIO = 3.0
MAX_ACCURACY_DROP = 0.005
DEFAULT_QUESTION = "who wrote the origin of species?"


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


# ------------------------------------------------------------------ 1. the timeline ------

def setup_timeline(root: Path, question: str) -> dict[str, Any]:
    from ragdesk.core.app import AppContext
    from ragdesk.core.models import starter
    from ragdesk.core.progress import ProgressUpdate
    from ragdesk.core.session import Session
    from ragdesk.core.snapshots.staged import has_dense

    app = AppContext(root)
    app.data.ensure()
    marks: dict[str, float] = {}
    answerable = threading.Event()
    errors: list[BaseException] = []
    t0 = time.perf_counter()

    def mark(name: str) -> None:
        marks.setdefault(name, time.perf_counter() - t0)

    def progress(u: ProgressUpdate) -> None:
        msg = u.message
        if msg.startswith("BM25"):
            mark("bm25_start")
        if msg.startswith("encoding"):
            mark("encoding_start")
        if "generator" in msg or "GGUF" in msg:
            mark("generator_reported")

    def on_answerable() -> None:
        mark("answerable")
        answerable.set()

    def setup() -> None:
        try:
            # As the app's Start button does (the CLI does not keep the generator loaded).
            starter.ensure_starter_snapshot(app.data, app.catalog, progress=progress,
                                            on_answerable=on_answerable, keep_generator=True)
            app.settings.set("model_pack", "starter")
        except BaseException as exc:
            errors.append(exc)
            answerable.set()
        finally:
            mark("dense_done")

    worker = threading.Thread(target=setup, name="setup-starter")
    worker.start()
    answerable.wait()
    if errors:
        raise errors[0]
    t_load = time.perf_counter()
    engine = Session(app).load_engine(pack="starter")
    marks["engine_load_s"] = time.perf_counter() - t_load
    index = engine.snapshot_index()
    retriever = "dense" if has_dense(index) else "sparse"
    ans = engine.answer(question, mode="token", decoding="fast", n_docs=5,
                        max_new_tokens=32, retriever=retriever)
    mark("first_answer")
    load_at_answer = load_average()
    worker.join()
    if errors:
        raise errors[0]
    rec = app.catalog.get_snapshot(starter.SNAPSHOT_NAME)
    folder = app.data.snapshot_dir(rec.slug)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    engine.close()
    app.close()
    return {
        "marks_s": {k: round(v, 2) for k, v in marks.items()},
        "first_answer": {"question": question, "text": ans.text, "retriever": retriever,
                         "snapshot": ans.snapshot, "docs": [d.title for d in ans.docs],
                         "answer_s": round(ans.timings.get("total_s", 0.0), 2)},
        "passages": rec.passages,
        "state": rec.state,
        "precision": (manifest.get("precision") or {}).get("passages"),
        "encoder": manifest["encoder"],
        "snapshot_folder": str(folder),
        "load_at_first_answer": load_at_answer,
    }


# ------------------------------------------------------------ 2. encoding throughput ------

def encoding_ratio(sample: int, batch_size: int, rounds: int, seed: int) -> dict[str, Any]:
    from bench import starter_passages
    from ragdesk.core.encoders import passage_inputs, token_length_order
    from ragdesk.core.models import starter

    today = starter.load_encoder("passage")  # the exact transformers forward, float32
    os.environ.pop("RAGDESK_ENCODE_PRECISION", None)
    new = today.fast()
    passages = starter_passages()
    pick = random.Random(seed).sample(range(len(passages)), min(sample, len(passages)))
    rows = today.tokenize(passage_inputs(today, [passages[i] for i in pick]))
    order = token_length_order(rows)
    batches = [order[s:s + batch_size] for s in range(0, len(rows), batch_size)]
    new.encode_tokenized([rows[i] for i in batches[0]])  # warm-up: packing, kernels
    today.encode_tokenized([rows[i] for i in batches[0]])
    spent = {"today": 0.0, "new": 0.0}
    out = {"today": np.zeros((len(rows), today.dim), np.float32),
           "new": np.zeros((len(rows), today.dim), np.float32)}
    encoders = {"today": today, "new": new}
    for r in range(rounds):
        for j, idx in enumerate(batches):
            batch = [rows[i] for i in idx]
            names = ["today", "new"] if (j + r) % 2 == 0 else ["new", "today"]
            for name in names:
                t = time.perf_counter()
                out[name][idx] = encoders[name].encode_tokenized(batch)
                spent[name] += time.perf_counter() - t
        print(f"encoding round {r + 1}: today {len(rows) * (r + 1) / spent['today']:.1f}/s, "
              f"new {len(rows) * (r + 1) / spent['new']:.1f}/s", file=sys.stderr, flush=True)
    a, b = out["today"], out["new"]
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    n = len(rows) * rounds
    return {
        "passages": len(rows), "rounds": rounds, "batch_size": batch_size,
        "tokens": int(sum(len(r["input_ids"]) for r in rows)),
        "today_passages_per_s": n / spent["today"], "new_passages_per_s": n / spent["new"],
        "ratio": spent["today"] / spent["new"], "new_precision": new.precision,
        "cosine_min": float(cos.min()), "cosine_mean": float(cos.mean()),
        "load_after": load_average(),
    }


# ---------------------------------------------------------------- 3. top-20 accuracy ------

def _passages(folder: Path) -> list[tuple[str, str]]:
    import sqlite3

    con = sqlite3.connect(f"file:{folder / 'passages.sqlite'}?mode=ro", uri=True)
    try:
        return [(str(t), str(x)) for t, x in
                con.execute("SELECT title, text FROM passages ORDER BY id")]
    finally:
        con.close()


def reference_embeddings(new_folder: Path, ref_root: Path | None, encode: bool) -> Any:
    """Today's encoder's vectors for the same passages, and where they came from."""
    if ref_root is not None:
        import sqlite3

        # Read-only, and not through Catalog: opening a Catalog migrates its schema in place,
        # and the reference data directory is someone else's.
        con = sqlite3.connect(f"file:{ref_root / 'catalog.sqlite'}?mode=ro", uri=True)
        try:
            row = con.execute("SELECT folder, state FROM snapshots WHERE name = ?",
                              ("vital-articles",)).fetchone()
        finally:
            con.close()
        if row is None:
            raise SystemExit(f"{ref_root} has no vital-articles snapshot")
        folder = ref_root / str(row[0])
        if row[1] != "ready":
            raise SystemExit(f"{folder} is not a ready snapshot")
        if _passages(folder) != _passages(new_folder):
            raise SystemExit(f"{folder} holds other passages than the new snapshot")
        m = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        made = (m.get("precision") or {}).get("passages") or m["source"].get("precision")
        if (made or "float32") != "float32":
            raise SystemExit(f"{folder} was not encoded by today's (float32) encoder")
        return np.load(folder / "embeddings.npy", mmap_mode="r"), f"{folder} (read-only)"
    if not encode:
        return None, None
    from ragdesk.core.models import starter
    from ragdesk.core.snapshots.index import SnapshotIndex

    index = SnapshotIndex.open(new_folder)
    try:
        ps = index.get_passages(list(range(index.size)))
    finally:
        index.close()
    enc = starter.load_encoder("passage")
    from ragdesk.core.encoders import passage_inputs

    vecs = enc.encode(passage_inputs(enc, [(p.title, p.text) for p in ps]))
    return vecs, "encoded here with today's encoder"


def top20(new_folder: Path, embeddings: dict[str, Any], k: int = 20) -> dict[str, Any]:
    from ragdesk.core.evaluation.metrics import AnswerMatcher, passage_string
    from ragdesk.core.evaluation.questions import read_questions
    from ragdesk.core.evaluation.runner import answerable_flags
    from ragdesk.core.models import starter
    from ragdesk.core.snapshots.index import SnapshotIndex

    questions = read_questions(NQ_DEV)
    index = SnapshotIndex.open(new_folder)
    try:
        flags = answerable_flags(index, questions)
        qenc = starter.load_encoder("question")
        q = qenc.encode([x.question for x in questions])
        strings: dict[int, str] = {}

        def text(pid: int) -> str:
            if pid not in strings:
                p = index.get_passages([pid])[0]
                strings[pid] = passage_string(p.title, p.text)
            return strings[pid]

        out: dict[str, Any] = {"questions": len(questions), "answerable": int(sum(flags))}
        for name, emb in embeddings.items():
            e = np.asarray(emb, dtype=np.float32)
            hits = 0
            for s in range(0, len(questions), 256):
                scores = q[s:s + 256] @ e.T
                top = np.argpartition(-scores, k, axis=1)[:, :k]
                for j, row in enumerate(top):
                    i = s + j
                    if not flags[i]:
                        continue
                    m = AnswerMatcher(questions[i].answers)
                    hits += any(m.matches(text(int(pid))) for pid in row)
            out[name] = hits / max(1, sum(flags))
        return out
    finally:
        index.close()


# ------------------------------------------------------------------------- report ------

def render(r: dict[str, Any]) -> str:
    t = r["timeline"]["marks_s"]
    fa = r["timeline"]["first_answer"]
    e = r["encoding"]
    acc = r.get("accuracy") or {}
    first_ok = "meets" if t["first_answer"] <= TARGET_FIRST_ANSWER_S else "does NOT meet"
    ratio_ok = "meets" if e["ratio"] >= TARGET_RATIO else "does NOT meet"
    rows = [
        ["passages searchable with BM25, generator converted (can answer)",
         f"{t.get('answerable', float('nan')):.1f}"],
        ["engine loaded (question encoder + generator)", f"{t_plus(t, 'engine_load_s')}"],
        ["dense encoding started (after the generator, with both cores)",
         f"{t.get('encoding_start', float('nan')):.1f}"],
        [f"first question answered ({fa['retriever'].replace('sparse', 'BM25')}, while "
         "encoding)", f"{t['first_answer']:.1f}"],
        ["dense index finished (snapshot ready)", f"{t['dense_done']:.1f}"],
    ]
    lines = [
        "# First run: the starter pack from Start to the first answer",
        "",
        "`python -m bench.first_run_bench`: one process, a fresh data directory, "
        "`ensure_starter_snapshot` (what `ragdesk models setup-starter` and the app's Start "
        "button run) in a worker thread; the question is asked as soon as the setup can "
        "answer, while the dense vectors are being encoded.",
        "",
        md_table(["from the start of setup-starter", "seconds"], rows),
        "",
        f"First answer after **{t['first_answer']:.1f} s** ({first_ok} the "
        f"{TARGET_FIRST_ANSWER_S:.0f} s target); dense index finished after "
        f"**{t['dense_done']:.1f} s** ({r['timeline']['passages']:,} passages, "
        f"vectors in {r['timeline']['precision']}). Question: \"{fa['question']}\"; answer: "
        f"\"{fa['text']}\" from {', '.join(fa['docs'][:3])}, ...; generation "
        f"{fa['answer_s']:.1f} s. Load average at start {r['load_start']}, at the first answer "
        f"{r['timeline']['load_at_first_answer']}, at the end {r['load_end']} (1, 5, 15 min).",
        "",
        "## Passage encoding: today's encoder against the fused kernel",
        "",
        md_table(["encoder", "passages/s", "vectors"], [
            ["today: transformers forward, float32", f"{e['today_passages_per_s']:.1f}",
             "reference"],
            [f"new: fused kernel, {e['new_precision']}", f"{e['new_passages_per_s']:.1f}",
             f"cosine to float32 min {e['cosine_min']:.6f}, mean {e['cosine_mean']:.6f}"],
        ]),
        "",
        f"Throughput ratio **{e['ratio']:.2f}x** ({ratio_ok} the {TARGET_RATIO:.0f}x target) "
        f"on {e['passages']:,} random starter passages ({e['tokens']:,} tokens) x "
        f"{e['rounds']} rounds, batches of {e['batch_size']} alternating between the two "
        f"encoders in one process (load average after: {e['load_after']}).",
    ]
    if acc:
        drop = acc["today"] - acc["new"]
        acc_ok = "within" if abs(drop) <= MAX_ACCURACY_DROP else "NOT within"
        lines += [
            "",
            "## Retrieval quality",
            "",
            md_table(["passage vectors", "top-20 accuracy (answerable NQ-open dev)"], [
                ["today's encoder (float32)", f"{acc['today']:.3f}"],
                [f"new kernel ({e['new_precision']})", f"{acc['new']:.3f}"],
            ]),
            "",
            f"{acc['answerable']:,} answerable of {acc['questions']:,} questions; questions "
            f"encoded exactly for both. Difference {drop:+.4f} ({acc_ok} "
            f"{MAX_ACCURACY_DROP}). Today's vectors: {r.get('reference_source')}.",
        ]
    lines += ["", machine_line(r["machine"])]
    return "\n".join(lines)


def t_plus(t: dict[str, float], key: str) -> str:
    if "answerable" in t and key in t:
        return f"{t['answerable'] + t[key]:.1f}"
    return "–"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--question", default=DEFAULT_QUESTION)
    ap.add_argument("--sample", type=int, default=512, help="passages for the throughput run")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reference-data-dir", type=Path,
                    help="a data directory whose vital-articles snapshot today's encoder built")
    ap.add_argument("--encode-reference", action="store_true",
                    help="encode all passages with today's encoder here (slow)")
    ap.add_argument("--keep", type=Path, help="build the data directory here and keep it")
    ap.add_argument("--render", action="store_true",
                    help="only rewrite the .md from the last results/first_run.json")
    args = ap.parse_args(argv)
    if args.render:
        from bench import RESULTS_DIR

        last = json.loads((RESULTS_DIR / "first_run.json").read_text(encoding="utf-8"))
        write_results("first_run", last, render(last))
        return 0

    load_start = load_average()
    info = machine()
    root = args.keep or Path(tempfile.mkdtemp(prefix="ragdesk-first-run-")) / "data"
    try:
        timeline = setup_timeline(root, args.question)
        print(json.dumps(timeline["marks_s"]), file=sys.stderr, flush=True)
        encoding = encoding_ratio(args.sample, args.batch_size, args.rounds, args.seed)
        res: dict[str, Any] = {"timeline": timeline, "encoding": encoding,
                               "load_start": load_start, "machine": info}
        new_folder = Path(timeline["snapshot_folder"])
        ref, source = reference_embeddings(new_folder, args.reference_data_dir,
                                           args.encode_reference)
        if ref is not None:
            new = np.load(new_folder / "embeddings.npy", mmap_mode="r")
            res["accuracy"] = top20(new_folder, {"today": ref, "new": new})
            res["reference_source"] = source
        res["load_end"] = load_average()
        t = timeline["marks_s"]
        res["meets_targets"] = bool(
            t["first_answer"] <= TARGET_FIRST_ANSWER_S and encoding["ratio"] >= TARGET_RATIO
            and ("accuracy" not in res
                 or abs(res["accuracy"]["today"] - res["accuracy"]["new"]) <= MAX_ACCURACY_DROP))
        md = render(res)
        write_results("first_run", res, md)
        print(md)
    finally:
        if args.keep is None:
            shutil.rmtree(root.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
