"""termagent/allocator.py: the heap setting keeps torch's large CPU blocks out of mmap; `system` leaves glibc alone.

Each case runs in a fresh interpreter (glibc's settings are per process and never put back)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# mallinfo2().hblkhd: bytes glibc holds in mmap'd blocks, read while a 64 MiB tensor is alive
PROBE = r"""
import ctypes, json, torch
from termagent import allocator

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

record = allocator.configure()
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
block = torch.empty(64 << 20, dtype=torch.uint8)
block.fill_(1)
print(json.dumps({"record": record, "mmapped": libc.mallinfo2().hblkhd}))
"""


def probe(mode: str) -> dict:
    env = {**os.environ, "TERMAGENT_MALLOC": mode, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def glibc() -> bool:
    from termagent.allocator import _glibc

    return _glibc()[0] is not None


@pytest.mark.skipif(not glibc(), reason="glibc's mallopt only")
def test_heap_mode_serves_large_tensors_from_the_heap_and_system_mode_from_mmap():
    system, heap = probe("system"), probe("heap")
    assert system["record"] == {"mode": "system", "glibc": system["record"]["glibc"], "settings": {}}
    assert system["mmapped"] >= 64 << 20  # glibc's default: a block this large is its own mapping
    assert heap["record"]["settings"] == {"M_MMAP_MAX": 0, "M_TRIM_THRESHOLD": 2**31 - 1, "M_TOP_PAD": 256 << 20}
    assert heap["mmapped"] < 64 << 20  # ...and with the setting it comes from the heap, reused after free


def test_a_bad_mode_names_the_variable(monkeypatch):
    from termagent import allocator

    monkeypatch.setenv(allocator.MALLOC_ENV, "jemalloc")
    with pytest.raises(ValueError, match="TERMAGENT_MALLOC='jemalloc'"):
        allocator.wanted_mode()


def test_default_is_heap_on_a_cpu_only_host(monkeypatch):
    import torch

    from termagent import allocator

    monkeypatch.delenv(allocator.MALLOC_ENV, raising=False)
    assert allocator.wanted_mode() == ("system" if torch.cuda.is_available() else "heap")
