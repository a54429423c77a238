"""A process's own memory on Linux: its resident-set high-water mark, and a cap on its growth.

CPU tensors have no allocator statistics, so a CPU case's peak memory is how far the process's
resident set rises above its size before the step (the approach of blosa.memprobe): the
high-water mark VmHWM is reset to the current resident set by writing 5 to /proc/self/clear_refs.
The cap is RLIMIT_AS: past it, an allocation fails in the process (torch raises "can't allocate
memory") instead of the whole machine filling up until the kernel's OOM killer picks a victim.
"""
from __future__ import annotations

import resource

MIB = 1024 * 1024
# What an allocation that failed under the cap looks like from Python: MemoryError, or torch's
# RuntimeError from its allocator (DefaultCPUAllocator; std::bad_alloc from C++ containers).
OOM_MESSAGES = ("can't allocate memory", "Cannot allocate memory", "bad_alloc", "out of memory")


class OutOfMemory(RuntimeError):
    """A case needed more memory than its limit allowed (CPU) or than the GPU had (CUDA)."""


def status_kib(field: str) -> int:
    """A field of /proc/self/status in KiB (VmRSS, VmHWM, VmSize...)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field} (peak memory on CPU needs Linux)")


def reset_peak() -> int:
    """Reset the high-water mark to the current resident set; returns that resident set (bytes)."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    return status_kib("VmRSS") * 1024


def peak_bytes() -> int:
    """The resident-set high-water mark since the last reset_peak (bytes)."""
    return status_kib("VmHWM") * 1024


def available_bytes() -> int:
    """MemAvailable of /proc/meminfo: what the machine can give without swapping (bytes)."""
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/meminfo has no MemAvailable")


def default_limit_bytes() -> int:
    """Half of what is available now: room for a case, with the rest left to other work here."""
    return available_bytes() // 2


def cap_growth(limit_bytes: int) -> None:
    """Let this process's address space grow by at most limit_bytes from now on (RLIMIT_AS).

    Address space, not resident memory, is what the kernel can cap per process; it is set after
    the process has loaded its code and started its threads, so that the cap is all headroom.
    Only lowers the limit: a hard limit already below is kept.
    """
    if isinstance(limit_bytes, bool) or not isinstance(limit_bytes, int) or limit_bytes < 1:
        raise ValueError(f"limit_bytes must be an int >= 1, got {limit_bytes!r}")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = status_kib("VmSize") * 1024 + limit_bytes
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft == resource.RLIM_INFINITY or cap < soft:
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def is_oom(error: BaseException) -> bool:
    """Whether `error` is an allocation that failed for want of memory."""
    return isinstance(error, MemoryError) or (
        isinstance(error, RuntimeError) and any(m in str(error) for m in OOM_MESSAGES))
