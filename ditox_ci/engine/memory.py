"""What the kernel and /proc say about memory: the machine's (total, available, under a memory
cgroup's limit), a process's resident size, and how many processes the OOM killer killed. The pool
sizes its budget and watches its workers with it (`engine.worker`); a worker's death is read with
it (`engine.deaths`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

# a container's memory cgroup, mounted at the root of the hierarchy: (limit, usage) files of v2,
# then v1 (whose "no limit" is a number near 2**63)
CGROUP_MEMORY_FILES = (
    ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
    ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
)
CGROUP_NO_LIMIT = 2**60

# where the kernel counts OOM kills: cgroup v2's memory.events, v1's memory.oom_control (the
# container's own cgroup is mounted at the root of the hierarchy), else the whole kernel's count
# (/proc/vmstat, Linux 4.13+), which a kill elsewhere on the host can raise at the same moment
_OOM_COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control", "/proc/vmstat")


def oom_kills() -> int | None:
    """How many processes the kernel's OOM killer has killed (in this cgroup where it says; else
    on this kernel); None where unknown."""
    for counter in _OOM_COUNTERS:
        try:
            lines = Path(counter).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            name, _, count = line.partition(" ")
            if name == "oom_kill" and count.strip().isdigit():
                return int(count)
    return None


def proc_mb(path: str, field: str) -> float:
    """One `Field:  N kB` figure of a /proc file (/proc/meminfo, /proc/<pid>/status) in MiB; 0 where
    it cannot be read."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def rss_mb(pid: int) -> float:
    return proc_mb(f"/proc/{pid}/status", "VmRSS")


def _meminfo_mb(field: str) -> float:
    """One figure of /proc/meminfo (`MemTotal`, `MemAvailable`) in MiB; 0 where it cannot be read."""
    return proc_mb("/proc/meminfo", field)


def machine_memory_mb() -> float:
    """The machine's memory (MemTotal)."""
    return _meminfo_mb("MemTotal")


def _cgroup_headroom_mb() -> float | None:
    """What this process's memory cgroup (v2, else v1) leaves below its limit; None: no limit."""
    for limit_file, usage_file in CGROUP_MEMORY_FILES:
        with contextlib.suppress(OSError, ValueError):
            limit = Path(limit_file).read_text().strip()
            if limit == "max" or int(limit) >= CGROUP_NO_LIMIT:
                return None
            return (int(limit) - int(Path(usage_file).read_text())) / 2**20
    return None


def available_memory_mb() -> float:
    """What the machine can give the workers now: /proc/meminfo's MemAvailable, less where a memory
    cgroup caps this process's group; 0 where neither can be read."""
    available = _meminfo_mb("MemAvailable")
    headroom = _cgroup_headroom_mb()
    if headroom is not None:
        available = min(available, headroom) if available else headroom
    return max(available, 0.0)


def worker_count(jobs: int, memory_limit_mb: int, warn: Callable[[str], None]) -> int:
    """`jobs`, else one worker per core; a warning when their memory limits exceed the machine's."""
    workers = jobs or os.cpu_count() or 1
    memory_mb = machine_memory_mb()
    if memory_mb and workers * memory_limit_mb > memory_mb:
        warn(
            f"{workers} workers × --memory-limit {memory_limit_mb} MiB exceed this machine's "
            f"{memory_mb:.0f} MiB: the kernel may kill a worker first (reported as out of memory); "
            "lower --jobs or --memory-limit"
        )
    return workers
