"""glibc malloc settings for CPU training and generation: keep freed memory in the heap for reuse.

PyTorch on CPU allocates its large tensors (activations, a 1.5 k-token x 49 k-vocabulary logits block, their
gradients) through the C library's malloc on every step. glibc serves a block above its mmap threshold with a
fresh `mmap` and unmaps it on `free`, so every step faults in and zeroes hundreds of MB of new pages in the kernel:
on the 2-core machine the warmup's loop on SmolLM2 spent 21 % of its CPU time in the kernel, and the setting below
made it 1.33x faster (`metrics/bench_allocator.json`). With `mode: heap`, set by `mallopt` at run time (no environment variable to set
before the process starts), the process never maps a block on its own (`M_MMAP_MAX` 0) and keeps what it frees in
its heap (`M_TRIM_THRESHOLD` and `M_TOP_PAD` large), so the next step reuses the same pages. The cost is a
resident set that stays at the process's peak instead of shrinking between steps.

Applied on CPU-only hosts with glibc (a CUDA host's large tensors live on the GPU, and other C libraries have
other knobs); `TERMAGENT_MALLOC=system` leaves the C library's defaults, `heap` forces the setting.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

MALLOC_ENV = "TERMAGENT_MALLOC"

# mallopt parameters, from glibc's <malloc.h>
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_MAX = -4

_HEAP_SETTINGS = {"M_MMAP_MAX": (M_MMAP_MAX, 0), "M_TRIM_THRESHOLD": (M_TRIM_THRESHOLD, 2**31 - 1),
                  "M_TOP_PAD": (M_TOP_PAD, 256 << 20)}
_applied: dict | None = None


def _glibc():
    """The process's glibc, or None (musl, macOS, ...)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        version = libc.gnu_get_libc_version
    except (OSError, AttributeError):
        return None, None
    version.restype = ctypes.c_char_p
    return libc, version().decode()


def wanted_mode() -> str:
    """`heap` or `system`: the environment's choice, else `heap` where no CUDA device is visible."""
    env = os.environ.get(MALLOC_ENV, "").strip().lower()
    if env in ("heap", "system"):
        return env
    if env:
        raise ValueError(f"{MALLOC_ENV}={env!r}: expected 'heap' or 'system'")
    try:
        import torch

        return "system" if torch.cuda.is_available() else "heap"
    except ImportError:
        return "heap"


def configure() -> dict:
    """Apply `wanted_mode()` once per process; return what was done (recorded in metrics)."""
    global _applied
    if _applied is not None:  # once per process: glibc's settings are not put back
        return _applied
    mode = wanted_mode()
    libc, version = _glibc()
    record: dict = {"mode": mode, "glibc": version, "settings": {}}
    if mode == "heap":
        if libc is None:
            record["mode"] = "system"
            record["why"] = "no glibc: the C library's defaults stay"
        else:
            for name, (param, value) in _HEAP_SETTINGS.items():
                if libc.mallopt(param, value) != 1:
                    raise OSError(f"mallopt({name}, {value}) failed (glibc {version})")
                record["settings"][name] = value
    _applied = record
    return record
