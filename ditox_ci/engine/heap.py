"""A worker keeps the memory a call freed for the next call of the same job, and gives it back to
the system when the job ends.

glibc serves every allocation over 32 MiB with a fresh mmap and unmaps it on free, so each
onnxoptimizer call on a large model faulted in, and zeroed, every page of its copies again: on
light/vgg19 (548 MiB) a call spent 0.6 s computing and 1.5-3.0 s in the kernel, 0.9 million page
faults a call. With mmap off and the heap never trimmed during a job the same call takes 0.5 s
after the first (`python bench/bench_heap.py onnx-data:light/vgg19`). What the heap holds free
goes back at the job's end (`release_freed_memory`), so a worker that swept a large model does not
carry its footprint into the next model's memory limit.

Only where the C library is glibc; elsewhere these calls do nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from typing import Any

# from glibc's <malloc.h>
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
# mallopt(3): "Setting M_TRIM_THRESHOLD to -1 disables trimming completely" (malloc_trim still trims)
TRIM_NEVER = -1
# What a worker may hold free between jobs: glibc's own trim threshold grows to this much by itself
# (twice its largest mmap threshold). malloc_trim walks the whole heap, about 2 ms even with nothing
# to give back, so the thousands of small models of a sweep skip it.
KEPT_FREE_MAX_BYTES = 64 * 2**20


class _MallInfo2(ctypes.Structure):
    """glibc's `struct mallinfo2` (2.33 and later): `fordblks` is the memory the heap holds free."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


@functools.cache
def _glibc() -> Any:
    """The C library when it has glibc's mallopt and malloc_trim, else None: the process's own
    symbols, libc's among them (find_library would run ldconfig in every worker)."""
    with contextlib.suppress(OSError, TypeError, AttributeError):
        library = ctypes.CDLL(None)
        library.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        library.malloc_trim.argtypes = (ctypes.c_size_t,)
        if hasattr(library, "mallinfo2"):
            library.mallinfo2.restype = _MallInfo2
        return library
    return None


def keep_freed_memory() -> bool:
    """Serve large allocations from the heap and keep what is freed there; False where this C
    library cannot (not glibc)."""
    library = _glibc()
    if library is None:
        return False
    return bool(library.mallopt(M_MMAP_MAX, 0)) and bool(library.mallopt(M_TRIM_THRESHOLD, TRIM_NEVER))


def free_bytes() -> int | None:
    """What the heap holds free now; None where the C library does not say (no mallinfo2)."""
    library = _glibc()
    if library is None or not hasattr(library, "mallinfo2"):
        return None
    return int(library.mallinfo2().fordblks)


def release_freed_memory() -> None:
    """Give the heap's free memory back to the system (a job ended) when it holds more than
    KEPT_FREE_MAX_BYTES, or when it cannot tell."""
    library = _glibc()
    if library is None:
        return
    free = free_bytes()
    if free is None or free > KEPT_FREE_MAX_BYTES:
        library.malloc_trim(0)
