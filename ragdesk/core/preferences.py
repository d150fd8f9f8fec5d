"""What the settings dialog edits: the data folder, the device and threads models run with,
the Hugging Face cache, the theme and the default answer options; their validation; which
changes take effect at once and which at the next start; and applying them to the process.

The data folder cannot be remembered inside itself, so it is kept in the user's config folder
(:func:`ragdesk.core.paths.location_file`); everything else is in ``settings.json``. An
environment variable the user set (``RAGDESK_DATA_DIR``, ``RAGDESK_DEVICE``, ``HF_HOME``,
``HF_HUB_CACHE``, ``OMP_NUM_THREADS``) still wins over a setting, as it did before there was a
dialog: :func:`environment_overrides` says which, for the dialog to show.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from ragdesk.core.atomic import write_bytes_atomic
from ragdesk.core.devices import DEVICE_ENV
from ragdesk.core.options import DECODINGS, MODES, RETRIEVERS
from ragdesk.core.paths import ENV_VAR, location_file
from ragdesk.core.settings import DEFAULTS, Settings

DEVICE_KEY = "device"
THREADS_KEY = "threads"
HF_CACHE_KEY = "hf_cache"
THEME_KEY = "theme"
# The answer options remembered in settings.json (the controls panel writes the same keys).
ANSWER_KEYS = ("mode", "decoding", "n_docs", "num_beams", "max_new_tokens", "retriever")
# The engine's allowed values, from their one home.
ANSWER_CHOICES: dict[str, tuple[str, ...]] = {"mode": MODES, "decoding": DECODINGS,
                                              "retriever": RETRIEVERS}
# Bounds the dialog's number boxes allow; the engine accepts more, nobody waits for it.
ANSWER_RANGES: dict[str, tuple[int, int]] = {"n_docs": (1, 50), "num_beams": (1, 16),
                                             "max_new_tokens": (1, 512)}
MAX_THREADS = 256
_DEVICE_RE = re.compile(r"^(cpu|auto|mps|cuda(:\d+)?)$")

# Which fields take effect only after a restart, and what the dialog calls them.
RESTART_FIELDS = {
    "data_dir": "data folder",  # the catalog and snapshots open once, at start
    "device": "device",  # models are loaded once, onto the device chosen then
    "hf_cache": "Hugging Face cache",  # huggingface_hub reads its cache folder at import
}
# The environment variables that override each field when the user set them.
OVERRIDING_ENV = {"data_dir": (ENV_VAR,), "device": (DEVICE_ENV,),
                  "hf_cache": ("HF_HUB_CACHE", "HF_HOME"), "threads": ("OMP_NUM_THREADS",)}

# Environment variables this process set from the settings (not the user): they must not be
# reported as the user's overrides.
_SET_FROM_SETTINGS: dict[str, str] = {}


@dataclass(frozen=True)
class Preferences:
    data_dir: str
    device: str = "cpu"
    threads: int = 0  # 0: as many as PyTorch chooses
    hf_cache: str = ""  # "": huggingface_hub's own default (~/.cache/huggingface/hub)
    theme: str = "system"
    answer: dict[str, object] = field(
        default_factory=lambda: {k: DEFAULTS.get(k) for k in ANSWER_KEYS})


def load_preferences(settings: Settings, data_dir: Path) -> Preferences:
    """The preferences as they are now; ``data_dir`` is the folder this process uses."""
    threads = settings.get(THREADS_KEY, 0)
    return Preferences(
        data_dir=str(data_dir),
        device=str(settings.get(DEVICE_KEY) or "cpu"),
        threads=threads if isinstance(threads, int) and not isinstance(threads, bool) else 0,
        hf_cache=str(settings.get(HF_CACHE_KEY) or ""),
        theme=str(settings.get(THEME_KEY) or "system"),
        answer={k: settings.get(k, DEFAULTS.get(k)) for k in ANSWER_KEYS},
    )


def _folder_problem(text: str, what: str) -> str | None:
    """Why ``text`` cannot be used as a folder to write in, or None when it can. Nothing is
    created: the nearest existing folder must be writable for the rest to be made later."""
    if not text.strip():
        return f"Choose a folder for the {what}."
    path = Path(text.strip()).expanduser()
    if not path.is_absolute():
        return f"The {what} must be a full path (it is {text!r})."
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            return f"No part of {path} exists."
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is a file, not a folder."
    try:
        fd, name = tempfile.mkstemp(prefix=".ragdesk-write-test-", dir=probe)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        return f"The {what} cannot be written in {probe} ({exc.strerror or exc})."
    return None


def _device_problem(device: str) -> str | None:
    """Why PyTorch cannot use ``device`` here, when PyTorch is loaded already (importing it
    only to check would cost seconds; the model loader reports it otherwise)."""
    torch = sys.modules.get("torch")
    if torch is None or device in ("cpu", "auto"):
        return None
    if device.startswith("cuda"):
        count = int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
        index = int(device.split(":")[1]) if ":" in device else 0
        if index >= count:
            return (f"This PyTorch sees {count} CUDA device(s), so {device!r} cannot be "
                    "used; choose cpu or auto.")
    if device == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            return "This PyTorch has no MPS device (Apple GPUs); choose cpu or auto."
    return None


def validate(prefs: Preferences) -> dict[str, str]:
    """Problems by field name (``answer.n_docs`` for an answer option); empty when all is
    well. Reads the disk (folder checks): call it off the GUI thread."""
    problems: dict[str, str] = {}
    if (msg := _folder_problem(prefs.data_dir, "data folder")) is not None:
        problems["data_dir"] = msg
    if not _DEVICE_RE.match(prefs.device.strip().lower()):
        problems["device"] = (f"Unknown device {prefs.device!r}: use cpu, auto, cuda, "
                              "cuda:N or mps.")
    elif (msg := _device_problem(prefs.device.strip().lower())) is not None:
        problems["device"] = msg
    if not isinstance(prefs.threads, int) or not 0 <= prefs.threads <= MAX_THREADS:
        problems["threads"] = f"Threads must be between 0 (automatic) and {MAX_THREADS}."
    if prefs.hf_cache.strip() and \
            (msg := _folder_problem(prefs.hf_cache, "Hugging Face cache")) is not None:
        problems["hf_cache"] = msg
    for key, allowed in ANSWER_CHOICES.items():
        if prefs.answer.get(key) not in allowed:
            problems[f"answer.{key}"] = f"{key} must be one of {', '.join(allowed)}."
    for key, (lo, hi) in ANSWER_RANGES.items():
        value = prefs.answer.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
            problems[f"answer.{key}"] = f"{key} must be between {lo} and {hi}."
    return problems


def normalized(prefs: Preferences) -> Preferences:
    """Paths expanded and stripped, the device in lower case: what is compared and saved."""
    def folder(text: str) -> str:
        return str(Path(text.strip()).expanduser()) if text.strip() else ""

    return replace(prefs, data_dir=folder(prefs.data_dir), hf_cache=folder(prefs.hf_cache),
                   device=prefs.device.strip().lower())


def changed_fields(old: Preferences, new: Preferences) -> list[str]:
    a, b = normalized(old), normalized(new)
    return [f.name for f in fields(Preferences) if getattr(a, f.name) != getattr(b, f.name)]


def restart_needed(old: Preferences, new: Preferences) -> list[str]:
    """What the dialog calls the changed fields that take effect only at the next start."""
    return [RESTART_FIELDS[f] for f in changed_fields(old, new) if f in RESTART_FIELDS]


def save_preferences(settings: Settings, old: Preferences, new: Preferences) -> list[str]:
    """Write what changed (settings.json, and the data folder's location file); returns
    :func:`restart_needed`. Validate first: this writes what it is given."""
    new = normalized(new)
    changed = changed_fields(old, new)
    values: dict[str, object] = {}
    if "device" in changed:
        values[DEVICE_KEY] = new.device
    if "threads" in changed:
        values[THREADS_KEY] = new.threads
    if "hf_cache" in changed:
        values[HF_CACHE_KEY] = new.hf_cache or None
    if "theme" in changed:
        values[THEME_KEY] = new.theme
    if "answer" in changed:
        values.update({k: new.answer[k] for k in ANSWER_KEYS if k in new.answer})
    if values:
        settings.update(values)
    if "data_dir" in changed:
        target = location_file()
        target.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(target, (new.data_dir + "\n").encode("utf-8"))
    return restart_needed(old, new)


def environment_overrides(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Fields that an environment variable set by the user overrides: field -> ``VAR=value``
    (what the dialog shows beside the field it cannot change)."""
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for name, variables in OVERRIDING_ENV.items():
        for var in variables:
            value = env.get(var)
            if value and _SET_FROM_SETTINGS.get(var) != value:
                out[name] = f"{var}={value}"
                break
    return out


def apply_environment(settings: Settings,
                      environ: MutableMapping[str, str] | None = None) -> None:
    """At start, before torch or huggingface_hub is imported: put the device, the cache
    folder and the thread count chosen in the settings into the environment the loaders
    read, unless the user's own environment already sets them."""
    env = os.environ if environ is None else environ
    wanted = {DEVICE_ENV: settings.get(DEVICE_KEY), "HF_HUB_CACHE": settings.get(HF_CACHE_KEY)}
    threads = settings.get(THREADS_KEY)
    if isinstance(threads, int) and not isinstance(threads, bool) and threads > 0:
        wanted["OMP_NUM_THREADS"] = str(threads)
    else:
        wanted["OMP_NUM_THREADS"] = _quota_default()
    for var, value in wanted.items():
        if not value or env.get(var):
            continue
        if var == "HF_HUB_CACHE" and env.get("HF_HOME"):
            continue  # the user's HF_HOME places the cache already
        env[var] = str(value)
        _SET_FROM_SETTINGS[var] = str(value)


def _quota_default() -> str | None:
    """"Automatic" where a CPU quota binds: the threads it keeps busy. torch and faiss count
    the CPUs (or their affinity) and would start a thread per host core inside a container
    given two cores' worth of time."""
    from ragdesk.core.free_cores import affinity_cores, usable_cores

    cores = usable_cores()
    return str(cores) if cores < affinity_cores() else None


def apply_threads(threads: int) -> None:
    """Use ``threads`` CPU threads from now on, where the libraries are loaded already (the
    next start reads the setting through :func:`apply_environment`). Call it on the thread
    that runs the models: OpenMP keeps the count per calling thread."""
    from ragdesk.core.free_cores import usable_cores, want_threads

    n = threads if threads > 0 else usable_cores()
    want_threads(n)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(n)
    faiss = sys.modules.get("faiss")
    if faiss is not None:
        faiss.omp_set_num_threads(n)
