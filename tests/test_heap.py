"""The allocator policy of launchtui's commands (launchtui/heap.py): one arena from the command's
start; for the headless commands, large blocks recycled from the read's start where the reader asks
(Nsight's SQLite columns), else once the model and index are built, the TUI in its load worker.
Put back when the command ends, and never set by the notebook API."""
from __future__ import annotations

import pytest

from conftest import ROOT
from launchtui import heap
from launchtui.cli import main
from launchtui.cpus import usable_cpus

DEMO = ROOT / "fixtures" / "demo" / "demo.sqlite"


class FakeLibc:
    def __init__(self):
        self.calls = []

    def mallopt(self, param, value):
        self.calls.append((param, value))
        return 1

    def malloc_trim(self, pad):
        self.calls.append(("trim", pad))
        return 1


@pytest.fixture
def libc(monkeypatch):
    fake = FakeLibc()
    monkeypatch.setattr(heap, "_libc", lambda: fake)
    return fake


ARENA = [(heap.M_ARENA_MAX, 1)]
ARENA_BACK = [(heap.M_ARENA_MAX, 8 * usable_cpus())]
SET = ARENA + [(heap.M_MMAP_THRESHOLD, 1 << 30), (heap.M_TRIM_THRESHOLD, 1 << 30)]
RESTORED = ARENA_BACK + [(heap.M_MMAP_THRESHOLD, 32 << 20), (heap.M_TRIM_THRESHOLD, 64 << 20), ("trim", 0)]


def _stages_seen(monkeypatch) -> dict:
    """(one arena, recycling) as each stage began: the reader's read, the index, the report, the record."""
    import launchtui.analysis.index as index
    import launchtui.analysis.record as record
    import launchtui.analysis.report as report
    from launchtui.trace import registry
    seen = {}
    real_read = registry.Reader.read

    def read(self, *a, **k):
        seen["read"] = (heap.single_arena(), heap.recycling())
        return real_read(self, *a, **k)
    monkeypatch.setattr(registry.Reader, "read", read)
    for mod, name in ((index, "trace_index"), (report, "build_report"), (record, "record_and_stalls")):
        def spy(*a, _f=getattr(mod, name), _n=name, **k):
            seen[_n] = (heap.single_arena(), heap.recycling())
            return _f(*a, **k)
        monkeypatch.setattr(mod, name, spy)
    return seen


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_report_recycles_from_the_read_where_the_reader_asks_and_puts_glibc_back(fmt, libc, monkeypatch,
                                                                                 capsys, tmp_path):
    """Every stage runs with one arena. An Nsight export's reader asks for recycled blocks from its
    read on (its temporaries are columns); the Kineto reader holds the whole JSON text while it
    decodes, and recycled that one block would stay a resident hole under the model, so its read
    and index run under glibc's policy and the analyses recycle. When `main` returns the process
    is as it was."""
    if fmt == "nsys":
        path = DEMO
    else:
        from fixtures import synth
        path = synth.write_kineto_json(synth.simulate(), tmp_path / "t.json")
    seen = _stages_seen(monkeypatch)
    assert main(["report", str(path), "--json", "--no-cache"]) == 0
    assert '"record"' in capsys.readouterr().out
    early = fmt == "nsys"
    assert seen == {"read": (True, early), "trace_index": (True, early), "build_report": (True, True),
                    "record_and_stalls": (True, True)}
    assert libc.calls == SET + RESTORED   # once per command, however many ask
    assert not heap.recycling() and not heap.single_arena()


def test_a_file_that_fails_to_open_puts_the_arena_limit_back(libc, tmp_path, capsys):
    bad = tmp_path / "not_a_trace.sqlite"
    bad.write_bytes(b"this is not SQLite" * 100)
    assert main(["report", str(bad), "--json"]) == 2
    assert str(bad) in capsys.readouterr().err
    assert libc.calls == ARENA + ARENA_BACK and not heap.recycling() and not heap.single_arena()


def test_the_tui_starts_in_one_arena_and_puts_glibc_back(libc, monkeypatch):
    """Before its app starts, the TUI holds one arena and no recycling: its load worker takes the
    policy over (tested below); when `main` returns the process is as it was."""
    import launchtui.tui.app as app
    seen = []
    monkeypatch.setattr(app, "run_app", lambda args: seen.append((heap.single_arena(), heap.recycling())) or 0)
    assert main([str(DEMO)]) == 0
    assert seen == [(True, False)] and libc.calls == ARENA + ARENA_BACK
    assert not heap.recycling() and not heap.single_arena()


@pytest.mark.tui
@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_the_tuis_load_worker_recycles_as_a_headless_command_does(fmt, libc, monkeypatch, tmp_path):
    """The TUI reads in a worker that takes the policy over: an Nsight export recycles from its read,
    a Kineto trace once read and indexed; the free memory goes back once the first fill is done."""
    from tui_helpers import make_app, run, wait_ready
    if fmt == "nsys":
        path = DEMO
    else:
        from fixtures import synth
        path = synth.write_kineto_json(synth.simulate(), tmp_path / "t.json")
    seen = _stages_seen(monkeypatch)
    assert heap.one_arena()          # as cli.main does
    app = make_app(path)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_ready(app, pilot)
            assert app.main.fill.complete
            for _ in range(2000):    # Kineto: the launch details at the cursor read the whole file
                if fmt == "nsys" or app.main.launch_details.ready:
                    break
                await pilot.pause(0.005)
    try:
        run(go())
    finally:
        heap.default_large_blocks()
    early = fmt == "nsys"
    assert seen["read"] == (True, early) and seen["trace_index"] == (True, early)
    # the free memory goes back after the first fill, and after the Kineto details' whole-file read
    assert libc.calls == SET + [("trim", 0)] * (1 if early else 2) + RESTORED


def test_free_memory_goes_back_only_while_recycling(libc):
    """`release_free` (the TUI's, once its first fill is done) never touches a process whose
    policy launchtui did not set: the notebook API's, the tests'."""
    assert heap.release_free() is False and libc.calls == []
    assert heap.one_arena() and heap.recycle_large_blocks()
    assert heap.release_free() is True and libc.calls == SET + [("trim", 0)]
    heap.default_large_blocks()
    assert libc.calls[len(SET) + 1:] == RESTORED and heap.release_free() is False


def test_a_worker_that_took_the_policy_switches_it_and_no_other_thread_does(libc):
    """The TUI's load worker takes the policy over inside a command only; from then on it, not
    the main thread, recycles; the command's end gives it back to the main thread."""
    import threading

    def in_thread(f):
        out = []
        t = threading.Thread(target=lambda: out.append(f()))
        t.start()
        t.join()
        return out[0]
    assert in_thread(heap.take_policy) is False           # no command: nothing to take
    assert heap.one_arena()
    got = []

    def worker():
        got.append(heap.take_policy())
        got.append(in_thread(heap.recycle_large_blocks))   # its own helpers may not
        got.append(heap.recycling())
        got.append(heap.recycle_while_reading())
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert got == [True, False, False, True] and heap.recycling() and libc.calls == SET
    heap.default_large_blocks()
    assert heap.one_arena() and heap.recycle_large_blocks()   # the main thread's again
    heap.default_large_blocks()


def test_an_error_after_the_open_still_puts_glibc_back(libc, monkeypatch, capsys):
    import launchtui.analysis.report as report

    def boom(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(report, "build_report", boom)
    assert main(["report", str(DEMO), "--json", "--no-cache"]) == 130
    assert libc.calls == SET + RESTORED and not heap.recycling()


def test_the_notebook_api_never_touches_the_users_process(libc):
    """Not even where the reader asks for recycling (the Nsight export read here, uncached)."""
    import launchtui
    t = launchtui.open(DEMO, use_cache=False)
    assert len(t.kernels()) > 0 and t.record()["iterations"]
    assert libc.calls == [] and not heap.recycling()


def test_off_glibc_every_policy_is_a_no_op(monkeypatch):
    monkeypatch.setattr(heap, "_libc", lambda: None)
    assert heap.recycle_large_blocks() is False and not heap.recycling()
    assert heap.recycle_while_reading() is False and not heap.recycling()
    assert heap.one_arena() is False and not heap.single_arena()
    assert heap.take_policy() is False and heap.release_free() is False
    heap.default_large_blocks()


def test_on_this_glibc_the_policy_applies_and_reverts():
    if heap._libc() is None:
        pytest.skip("not glibc: the policy is a no-op here (tested above)")
    assert heap.recycle_large_blocks() is True and heap.recycling()
    assert heap.one_arena() is True and heap.single_arena()
    heap.default_large_blocks()
    assert not heap.recycling() and not heap.single_arena()


def test_a_worker_thread_never_switches_the_policy(libc):
    """`diff` reads its two traces on two threads: the first done must not switch glibc's policy
    under the other's read."""
    import threading
    got = []
    t = threading.Thread(target=lambda: got.extend([heap.recycle_large_blocks(), heap.one_arena()]))
    t.start()
    t.join()
    assert got == [False, False] and libc.calls == [] and not heap.recycling() and not heap.single_arena()


def test_diff_reads_both_traces_then_recycles_for_its_analyses(libc, monkeypatch, capsys):
    import launchtui.analysis.diff_inputs as diff_inputs
    seen = []
    real = diff_inputs.diff_document

    def spy(*a, **k):
        seen.append(heap.recycling())
        return real(*a, **k)
    monkeypatch.setattr(diff_inputs, "diff_document", spy)
    reads = _stages_seen(monkeypatch)
    assert main(["diff", str(DEMO), str(DEMO), "--json", "--no-cache"]) == 0
    assert '"verdict"' in capsys.readouterr().out
    # the readers ask from worker threads, which never switch the policy: one arena, no recycling
    assert reads["read"] == (True, False)
    assert seen == [True] and libc.calls == SET + RESTORED and not heap.recycling()
