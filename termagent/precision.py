"""Which float format to compute in: bf16 where the hardware has it (a GPU, or a CPU with bf16 instructions),
detected rather than assumed, with an override.

    cpu_bf16_flags()              # ['avx512_bf16'] on this project's machine (AMD EPYC), [] on a plain AVX2 CPU
    cpu_bf16_supported()          # the flags, unless TERMAGENT_BF16 says otherwise
    generation_dtype("cpu")       # torch.bfloat16 where supported, else torch.float32

Log-probabilities are computed from logits upcast to float32 wherever this project computes them
(termagent.policy.hf, termagent.policy.kv); TRL's own keep fp32 log-sum-exp statistics.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

# bf16 on a CPU: only where the CPU has bf16 instructions (detected, never assumed). Without them torch
# emulates bf16 matmuls, slower than fp32. TERMAGENT_BF16 overrides: 0 = never (also on a GPU), 1 = also on a
# CPU without the flags, auto (default) = detect.
BF16_ENV = "TERMAGENT_BF16"
# /proc/cpuinfo flags of bf16 matmul instructions: x86 AMX tiles and AVX-512 BF16 (`flags`), Arm BF16 (`Features`).
CPU_BF16_FLAGS = ("amx_bf16", "avx512_bf16", "bf16")


def cpu_bf16_flags(cpuinfo: str | Path = "/proc/cpuinfo") -> list[str]:
    """The bf16 instruction flags the first CPU of a /proc/cpuinfo-format file lists ([] when none, or no file)."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return []
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            present = set(value.split())
            return [flag for flag in CPU_BF16_FLAGS if flag in present]
    return []


def bf16_mode(env: dict[str, str] | None = None) -> str:
    """TERMAGENT_BF16 as "auto", "off" or "on" (an unknown value is an error naming the variable)."""
    raw = (os.environ if env is None else env).get(BF16_ENV, "auto").strip().lower() or "auto"
    modes = {"auto": "auto", "0": "off", "off": "off", "false": "off", "no": "off",
             "1": "on", "on": "on", "true": "on", "yes": "on"}
    if raw not in modes:
        raise ValueError(f"env {BF16_ENV} must be auto, 0 or 1, got {raw!r}")
    return modes[raw]


def cpu_bf16_supported(cpuinfo: str | Path = "/proc/cpuinfo", env: dict[str, str] | None = None) -> bool:
    """bf16 compute on this CPU: its flags say so (cpu_bf16_flags), unless TERMAGENT_BF16 says otherwise."""
    mode = bf16_mode(env)
    return mode == "on" or (mode == "auto" and bool(cpu_bf16_flags(cpuinfo)))


def generation_dtype(device: str) -> torch.dtype:
    """The weights' dtype for in-process generation on `device`: bf16 on a GPU that has it or a CPU with bf16
    instructions (decoding reads every weight per token: half the bytes), else fp32."""
    if str(device).startswith("cuda"):
        return torch.bfloat16 if bf16_mode() != "off" and torch.cuda.is_bf16_supported() else torch.float32
    return torch.bfloat16 if cpu_bf16_supported() else torch.float32
