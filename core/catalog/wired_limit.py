"""Apple silicon: the share of unified memory the GPU may use, macOS's GPU wired-memory limit (issue #27).

Metal reports it as MTLDevice.recommendedMaxWorkingSetSize, and MLX and llama.cpp both keep to it. By default it is 2/3
of the machine's memory up to 32 GB and 3/4 above: ggml's Metal start-up logs print 11453.25 MB on a 16 GB Mac,
17179.89 MB (16 GiB) on 24 GB, 22906.50 MB (21.33 GiB) on 32 GB, 27 GiB on a 36 GB M4 Max, 48 GiB on 64 GB and 96 GiB
on 128 GB (the catalog's Apple rows, data/accelerators.csv, carry these figures as their usable memory). `sudo sysctl
iogpu.wired_limit_mb=N` raises it (N in MiB; 0 restores the default; it lasts until a restart): mlx-lm's README,
"Large Models", asks for N above the model's size and below the machine's memory.

How much to leave macOS when raising it is a policy here, not a sourced figure: MACOS_RESERVE_GIB."""

from __future__ import annotations

import math

from core.catalog.accelerators import BYTES_PER_GIB, Accelerator
from core.text import Bytes, Text

SMALL_MACHINE_MAX_GIB = 32  # up to this much unified memory the default limit is 2/3, above it 3/4
SMALL_MACHINE_SHARE = 2 / 3
LARGE_MACHINE_SHARE = 3 / 4
MACOS_RESERVE_GIB = 4.0  # policy: what a raised limit still leaves to macOS and the apps (not a sourced figure)
BYTES_PER_MIB = 2**20
SYSCTL = "sudo sysctl iogpu.wired_limit_mb"


def is_apple_gpu(acc: Accelerator) -> bool:
    return acc.vendor == "apple" and acc.kind == "apple"


def default_wired_limit_gib(memory_gib: float) -> float:
    """macOS's default GPU wired-memory limit on a Mac with `memory_gib` of unified memory."""
    return memory_gib * (SMALL_MACHINE_SHARE if memory_gib <= SMALL_MACHINE_MAX_GIB else LARGE_MACHINE_SHARE)


def most_wired_bytes(acc: Accelerator) -> float:
    """The most the limit may be raised to under this module's policy: all unified memory but MACOS_RESERVE_GIB."""
    return max(0.0, (acc.memory_gib - MACOS_RESERVE_GIB) * BYTES_PER_GIB)


def wired_limit_mb_for(needed_bytes: float) -> int:
    """The sysctl value (MiB) for a GPU that needs `needed_bytes`: rounded up to a whole GiB."""
    return max(1, math.ceil(needed_bytes / BYTES_PER_GIB)) * 1024


def raise_limit_advice(acc: Accelerator, needed_bytes: float) -> Text | None:
    """On an Apple GPU whose default limit is too small for `needed_bytes` but whose memory is not: the sysctl that
    makes it fit, in one line; else None."""
    if not is_apple_gpu(acc) or needed_bytes <= acc.usable_memory_bytes:
        return None
    mb = wired_limit_mb_for(needed_bytes)
    if mb * BYTES_PER_MIB > most_wired_bytes(acc):
        return None
    return Text.of(
        "Raise macOS's GPU wired-memory limit: {cmd}={mb} lets the GPU use {limit} of the {memory} unified memory "
        "(default {usable}; until the next restart), and {needed} fits.",
        cmd=SYSCTL,
        mb=mb,
        limit=Bytes(mb * BYTES_PER_MIB),
        memory=Bytes(acc.memory_bytes),
        usable=Bytes(acc.usable_memory_bytes),
        needed=Bytes(needed_bytes),
    )


def wired_limit_text(acc: Accelerator) -> Text | None:
    """What the GPU of an Apple part may use, in words; None for other hardware."""
    if not is_apple_gpu(acc):
        return None
    share = "2/3" if acc.memory_gib <= SMALL_MACHINE_MAX_GIB else "3/4"
    return Text.of(
        "Unified memory: the GPU of {name} may use {usable} of its {memory}, macOS's GPU wired-memory limit (by default "
        "{share} of the memory on this machine); {cmd}=N raises it to N MiB until the next restart, leaving the rest to "
        "macOS and the apps.",
        name=acc.name,
        usable=Bytes(acc.usable_memory_bytes),
        memory=Bytes(acc.memory_bytes),
        share=share,
        cmd=SYSCTL,
    )
