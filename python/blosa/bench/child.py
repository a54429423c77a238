"""Run one case in a child process of its own, under a memory cap, and bring its numbers back.

The children are forked from a fork server (multiprocessing's "forkserver") that has imported
torch and blosa once but run no op: a child starts in milliseconds instead of the seconds an
`import torch` takes, and starts clean (no tensors, no thread pool: forking a process whose
OpenMP pool has run is not safe). Each child runs exactly one case, so the resident-set growth it
reports is that case's alone, and then exits, giving every byte back.
"""
from __future__ import annotations

import multiprocessing
import signal
import traceback
from typing import Callable

import torch
# An optimizer's first step imports torch._dynamo (2 s here): done once, in the fork server.
import torch._dynamo  # noqa: F401

from blosa.bench.procmem import OutOfMemory

_context = None


class CaseFailed(RuntimeError):
    """A child failed other than for memory: its own error, or the signal that ended it."""


class CaseTimeout(CaseFailed):
    """A child ran past its time limit and was killed."""


def _fork_context():
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        # The server imports this module, and so the package blosa.bench, torch and blosa.nn, once;
        # the children inherit them (a child still imports the module of its function if need be).
        _context.set_forkserver_preload([__name__])
    return _context


def _child_main(conn, fn: Callable[..., dict], args: tuple, threads: int | None) -> None:
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        result = {"ok": fn(*args)}
    except OutOfMemory as error:
        result = {"oom": str(error)}
    except BaseException:  # noqa: BLE001 - whatever it was, the parent gets its words
        result = {"error": traceback.format_exc()[-3000:]}
    conn.send(result)
    conn.close()


def run_in_child(fn: Callable[..., dict], args: tuple, label: str, timeout_s: float | None = None,
                 threads: int | None = None) -> dict:
    """fn(*args) in a fresh child process on `threads` CPU threads (None: torch's default); its
    result (a picklable dict). fn must be importable (a module's top-level function) and cap its
    own memory once warmed up (procmem.cap_growth). Raises OutOfMemory when fn did, CaseTimeout
    past timeout_s seconds (None: no limit), and CaseFailed for any other failure; `label` names
    the case in their messages."""
    if timeout_s is not None and not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0 or None, got {timeout_s!r}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be an int >= 1 or None, got {threads!r}")
    context = _fork_context()
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child_main, args=(sender, fn, args, threads),
                            name=f"blosa-bench {label}", daemon=True)
    child.start()
    sender.close()  # ours; the child's copy is the only writer left, so its exit ends the pipe
    try:
        if not receiver.poll(timeout_s):
            child.kill()
            raise CaseTimeout(f"{label}: still running after {timeout_s:g} s, killed")
        try:
            result = receiver.recv()
        except EOFError:  # the child died without a word: a signal
            child.join()
            code = child.exitcode
            why = f"killed by {signal.Signals(-code).name}" if code and code < 0 else f"exit status {code}"
            hint = ""
            if code == -signal.SIGKILL:
                hint = " (SIGKILL: the kernel's OOM killer, or a kill from outside)"
            raise CaseFailed(f"{label}: the child process was {why}{hint}") from None
    finally:
        receiver.close()
        child.join()
    if "oom" in result:
        raise OutOfMemory(result["oom"])
    if "error" in result:
        raise CaseFailed(f"{label} failed in its child process:\n{result['error']}")
    return result["ok"]
