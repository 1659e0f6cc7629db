"""How the C allocator (glibc) treats large blocks in the processes launchtui runs as: the CLI and
the TUI. Never set from the notebook API (`launchtui.open`): that process is the user's.

glibc serves a block below its mmap threshold from the heap, where a freed block is handed to the
next request as it is; a block above it is mapped on request and unmapped on free, so each new one
is pages the kernel must fault in and zero. The threshold adapts as large blocks are freed, but
never past 32 MiB. The analyses' temporaries are one or a few per event, made and freed many times,
and past some trace size every one of them is above 32 MiB: from there each costs fresh pages, and
the run time grows faster than the event count (bench/MISSED.md, issue 24). On a VM that hands
freed pages back to its host, a fresh page costs more again. Every command, the TUI too, keeps
every thread in one arena (`one_arena`), so that recycling reaches its worker threads' blocks, and
recycles from the read's start where the reader's temporaries are columns (`recycle_while_reading`),
else once the trace is read. The TUI reads in a worker, which takes the policy over (`take_policy`),
and gives the free memory back once its first fill is done (`release_free`). Each function is a
no-op off glibc.
"""
from __future__ import annotations

import threading

from launchtui.cpus import usable_cpus

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
DYNAMIC_MAX = 32 << 20      # glibc's own ceiling for its adaptive threshold (64-bit)
RECYCLE_BELOW = 1 << 30     # once recycling: blocks up to 1 GiB come from the heap, reused
# free memory kept at the heap's top for the next block, past it returned: up to a recycled block's
# size, so two stages that grow the heap at once (the record beside the report) hand back
# no pages the next stage faults in again. Trimming returns only the top's pages and never moves a
# block, so where blocks go, and the heap's high-water, are the same whatever this is.
KEEP_FREE_TOP = RECYCLE_BELOW

_recycling = False
_one_arena = False
_owner = None        # the thread that may switch the policy; None: the main thread


def _libc():
    import ctypes
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt     # glibc's entry points, or AttributeError
        libc.malloc_trim
        return libc
    except (OSError, AttributeError, TypeError):
        return None


def _owner_libc():
    """glibc, when called from the thread that owns the command's policy: the main thread, or the
    TUI's load worker once it took it (`take_policy`). A process-wide policy is the command's to
    set, never another worker's (`diff`'s first reader done must not switch it under the other)."""
    me = threading.current_thread()
    owner = _owner if _owner is not None else threading.main_thread()
    return _libc() if me is owner else None


def one_arena() -> bool:
    """Every command's policy from its start, the TUI's too: every thread allocates from glibc's
    main arena. glibc gives a thread that allocates while another holds the main arena an arena of its
    own, and `recycle_large_blocks` reaches only the main one: the record's thread, the helper lane
    and the index's second thread freed and refaulted their temporaries in arenas of their own,
    and how much such an arena kept changed with a block's size (32-bit launch calls raised a 5M
    report's peak by ~100 MiB, bench/MISSED.md). Set before the command's own threads allocate:
    glibc picks an arena for a thread at its first allocation. Main thread only (the policy's first
    owner); True when applied."""
    global _one_arena
    libc = _owner_libc()
    if libc is None:
        return False
    libc.mallopt(M_ARENA_MAX, 1)
    _one_arena = True
    return True


def recycle_large_blocks() -> bool:
    """A command's policy once the model and its index are built: its large temporaries come
    from the heap and are reused there (no fresh pages), and up to KEEP_FREE_TOP of free memory
    at the heap's top waits for the next one. Not earlier, unless the reader asks
    (`recycle_while_reading`): the model's and index's long-lived columns, placed among a read's
    freed temporaries, can hold those holes resident and raise the peak (bench/MISSED.md).
    Only from the policy's owner (`_owner_libc`): a worker done with its read first (`diff` reads
    two traces at once) must not switch the policy under the other's read; the caller sets it once
    all are read. Once per command. True when applied (glibc, the owner)."""
    global _recycling
    libc = _owner_libc()
    if libc is None:
        return False
    if _recycling:   # once per command: the read may have asked first (`recycle_while_reading`)
        return True
    libc.mallopt(M_MMAP_THRESHOLD, RECYCLE_BELOW)
    libc.mallopt(M_TRIM_THRESHOLD, KEEP_FREE_TOP)
    _recycling = True
    return True


def recycle_while_reading() -> bool:
    """`recycle_large_blocks` from the start of a read whose reader asks for it
    (`registry.Reader.recycles_while_reading`): Nsight's, whose temporaries are column-sized arrays
    made and freed while it reads (the scans' int64 columns before they narrow, the time-order
    permutations). Mapped one by one, a 20M-kernel read faulted ~3.9 GiB of fresh pages for a
    2.1 GiB model; recycled, the index and the analyses reuse what the read freed, with the same
    peak (bench/MISSED.md). Not a reader that holds one large buffer for the whole file (the
    Kineto JSON text): freed under the model's columns, it stays a resident hole (2M Kineto events
    in the TUI: 1,419 against 1,290 MiB). Only inside a command (`one_arena` in force: never the
    notebook API's process) and from the policy's owner. True when applied."""
    return _one_arena and recycle_large_blocks()


def take_policy() -> bool:
    """The TUI's load worker takes the policy over from the main thread: the TUI reads in that
    worker, which may then recycle from the read's start where the reader asks, or once the trace
    is read, as a headless command's main thread does. Only inside a command (`one_arena` in
    force: never the notebook API's process nor the tests'). True when taken."""
    global _owner
    if not _one_arena:
        return False
    _owner = threading.current_thread()
    return True


def release_free() -> bool:
    """Return the heap's free pages to the system, wherever they lie (glibc's `malloc_trim(0)`):
    the TUI, once its first fill is done, as it may then sit idle for hours with the fill's
    temporaries freed but resident. Only while recycling (never the notebook API's process).
    True when done."""
    libc = _libc() if _recycling else None
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def default_large_blocks() -> None:
    """After `recycle_large_blocks` / `one_arena`: the values glibc's own adaptation ends at, its
    own arena limit (8 per CPU on 64 bits) and the heap's free pages returned, so a command run
    in-process (the tests, a script) leaves the process as it found it; threads started meanwhile
    keep the arena they have."""
    global _recycling, _one_arena, _owner
    libc = _libc() if _recycling or _one_arena else None
    if libc is not None and _one_arena:
        libc.mallopt(M_ARENA_MAX, 8 * usable_cpus())
    if libc is not None and _recycling:
        libc.mallopt(M_MMAP_THRESHOLD, DYNAMIC_MAX)
        libc.mallopt(M_TRIM_THRESHOLD, 2 * DYNAMIC_MAX)
        libc.malloc_trim(0)
    _recycling = _one_arena = False
    _owner = None


def recycling() -> bool:
    """Whether `recycle_large_blocks` is in force (tests)."""
    return _recycling


def single_arena() -> bool:
    """Whether `one_arena` is in force (tests)."""
    return _one_arena
