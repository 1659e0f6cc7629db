"""The session's keyed store (launchtui/session.py, tui/queries.py): for every query, a warm session
(a new process's: the model from the cache, nothing in memory) finds on disk what the cold one
computed, equal to it, without computing; equal queries asked by `report` and by the TUI are one
result; nothing is stored without a model entry; the index lives beside the model, not in it."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from launchtui import result_cache
from launchtui.analysis.backpressure import Options
from launchtui.analysis.record import RecordOptions
from launchtui.analysis.select import WHOLE, SelectionSpec
from launchtui.session import (MAPPED, MEMORY, MISS, PICKLE, Backpressure, Index, KernelGroups, Record,
                               SelectionStats, Session)
from launchtui.trace.cache import commit
from launchtui.trace.load import open_cached
from launchtui.tui import queries as tq
from launchtui.tui.verdict import VerdictSettings


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    from fixtures.synth import simulate, write_nsys_sqlite
    return str(write_nsys_sqlite(simulate(), tmp_path_factory.mktemp("session") / "synth.sqlite", variant="modern"))


def _plain(obj):
    """Every field, arrays as (dtype, values): equal iff the two structures hold the same values."""
    if isinstance(obj, np.ndarray):
        return (str(obj.dtype), obj.tolist())
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if hasattr(obj, "to_arrays"):      # the index: its stored arrays
        return _plain(obj.to_arrays())
    if dataclasses.is_dataclass(obj):
        return (type(obj).__name__, {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)})
    if hasattr(obj, "__slots__"):
        return (type(obj).__name__, {k: _plain(getattr(obj, k)) for k in obj.__slots__})
    if hasattr(obj, "levels"):         # RangeMax
        return ("RangeMax", _plain(obj.v), obj.B, obj.empty, _plain(obj.levels))
    return obj


def _table_rows(session):
    """TableRows has no compute of its own (the table worker's shows rows early): the worker's."""
    from launchtui.analysis.report import selection_stats
    from launchtui.tui.verdict import table_rows
    sel = WHOLE
    return lambda: (table_rows(session.trace, sel, "short", VerdictSettings()),
                    selection_stats(session.trace, sel, Options()))


def _idle_row(session):
    from launchtui.tui.idle_view import lane_inputs, query
    doc = session.get(Record(WHOLE, RecordOptions()))[0]
    return query(lane_inputs(doc))


# name -> (session -> query, session -> compute override or None)
QUERIES = {
    "index": (lambda s: Index(), None),
    "backpressure": (lambda s: Backpressure(WHOLE, Options()), None),
    "kernel groups": (lambda s: KernelGroups(WHOLE, "short"), None),
    "selection stats": (lambda s: SelectionStats(WHOLE, Options()), None),
    "record": (lambda s: Record(WHOLE, RecordOptions()), None),
    "record, one device, phase level 2": (
        lambda s: Record(WHOLE.with_devices((0,)), RecordOptions(phase_level=2)), None),
    "lanes": (lambda s: tq.TimelineLanes(Options()), None),
    "windows": (lambda s: tq.Windows(), None),
    "optimizer": (lambda s: tq.OptimizerRange(), None),
    "table rows": (lambda s: tq.TableRows(SelectionSpec(), "short", VerdictSettings(), 0, ()), _table_rows),
    "idle row": (_idle_row, None),
}


def _session(path) -> Session:
    """A session as a command has it: the model opened through the cache, its index asked for
    first (before a fresh read is committed: building it interns the distinguishing names into the
    model's strings), nothing else in memory; then the index stored beside the committed model."""
    opened = open_cached(path)
    session = Session(opened.trace, opened.entry)
    session.get(Index())
    commit(opened)
    session.save(Index())
    return session


@pytest.mark.parametrize("name", list(QUERIES))
def test_cold_equals_warm(name, synth, monkeypatch):
    make, override = QUERIES[name]
    cold = _session(synth)
    query = make(cold)
    assert query.store in (PICKLE, MAPPED)
    value = cold.get(query, override(cold) if override else None)
    if query.memo:
        assert cold.get(query) is value                   # then from memory
    # a fresh read of the same trace, no cache: what a --no-cache run computes
    fresh = Session(open_cached(synth, use_cache=False).trace)
    fresh_query = make(fresh)
    expected = fresh.get(fresh_query, override(fresh) if override else None)
    assert _plain(value) == _plain(expected)

    from launchtui.analysis import index
    for cls in (Index, Backpressure, KernelGroups, SelectionStats, Record, tq.TimelineLanes, tq.IdleRow, tq.Windows,
                tq.OptimizerRange, tq.TableRows):
        monkeypatch.setattr(cls, "compute", lambda self, s: pytest.fail(f"{type(self).__name__} computed when warm"))
    monkeypatch.setattr(index, "build_index", lambda tr: pytest.fail("index built when warm"))
    warm = _session(synth)
    got = warm.get(make(warm), lambda: pytest.fail(f"{name} computed on a warm session"))
    assert _plain(got) == _plain(value)
    if query.store == MAPPED:    # mapped from the file, not unpickled
        assert any(not a.flags.owndata for a in _arrays(got) if len(a))


def _arrays(obj, seen=None):
    """Every numpy array inside `obj` (dataclasses, slots, containers)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [a for v in obj for a in _arrays(v, seen)]
    if isinstance(obj, dict):
        return [a for v in obj.values() for a in _arrays(v, seen)]
    if dataclasses.is_dataclass(obj):
        return [a for f in dataclasses.fields(obj) for a in _arrays(getattr(obj, f.name), seen)]
    if hasattr(obj, "__slots__"):
        return [a for k in obj.__slots__ for a in _arrays(getattr(obj, k, None), seen)]
    return []


def test_report_stores_what_the_tui_asks_under_equal_keys(synth, monkeypatch, capsys):
    """`report --json` stores its backpressure, kernel groups, stats line and record; the TUI's
    loader, verdict and table workers ask for them with queries equal to report's, so each is
    found on disk, none computed."""
    from launchtui.cli import main
    from launchtui.tui import verdict
    put = []
    orig = Session.put
    monkeypatch.setattr(Session, "put", lambda self, q, v, remap=False: put.append(q) or orig(self, q, v, remap))
    asked = []
    get = Session.get
    monkeypatch.setattr(Session, "get", lambda self, q, compute=None: asked.append(q) or get(self, q, compute))
    assert main(["report", synth, "--json"]) == 0
    capsys.readouterr()
    stored = {q for q in put} | {q for q in asked if q.store != MEMORY}
    assert {type(q) for q in stored} >= {Backpressure, KernelGroups, SelectionStats, Record}

    for cls in (Backpressure, KernelGroups, SelectionStats, Record):
        monkeypatch.setattr(cls, "compute", lambda self, s: pytest.fail(f"{type(self).__name__} computed"))
    asked.clear()
    session = _session(synth)
    # what the TUI asks on its first open, as its workers build the queries
    from launchtui.tui.queries import marks_for
    marks_for(session, Options())                                    # loader: the timeline's marks
    verdict.compute(session, None, VerdictSettings(), 1)              # the verdict worker
    assert session.peek(KernelGroups(WHOLE, "short")) is not MISS     # the table worker
    session.get(SelectionStats(WHOLE, Options()))
    tui = {q for q in asked if type(q) in (Backpressure, SelectionStats, Record)}
    assert {type(q) for q in tui} == {Backpressure, SelectionStats, Record} and tui <= stored


def test_nothing_is_stored_without_a_model_entry(synth, tmp_path):
    calls = []
    for entry in (None, tmp_path / "absent.model"):
        s = Session(open_cached(synth, use_cache=False).trace, entry)
        q = Backpressure(WHOLE, Options(threshold=3))
        assert s.get(q, lambda: calls.append(1) or {"x": 1}) == {"x": 1}
        assert s.get(q) == {"x": 1}
        # the memory tier is the trace's: another load of the file has only the disk to look in
        assert Session(open_cached(synth, use_cache=False).trace, entry).peek(q) is MISS
    assert len(calls) == 2 and not result_cache.results_dir().exists()


def test_sessions_on_one_trace_share_its_memory_tier(synth):
    """Two sessions of one loaded trace, and the analyses under them, keep results in one memo:
    what one computed the other finds, computed once."""
    from launchtui.analysis import memo
    from launchtui.analysis.index import attached, trace_index
    trace = open_cached(synth, use_cache=False).trace
    calls = []
    q = Backpressure(WHOLE, Options(threshold=3))
    assert Session(trace).get(q, lambda: calls.append(1) or {"y": 2}) == {"y": 2}
    assert Session(trace, None).get(q, lambda: calls.append(1) or {"z": 3}) == {"y": 2}
    assert calls == [1]
    assert attached(trace) is None                  # nothing builds the index by looking
    idx = Session(trace).get(Index())
    assert trace_index(trace) is idx and attached(trace) is idx
    assert memo.of(trace).peek(q) == {"y": 2} and memo.of(open_cached(synth, use_cache=False).trace).peek(q) is memo.MISS


def test_other_inputs_new_code_or_a_rebuilt_entry_miss(synth, monkeypatch):
    import os
    s = _session(synth)
    q = Record(WHOLE, RecordOptions())
    s.get(q)
    assert _session(synth).peek(q) is not MISS
    assert _session(synth).peek(Record(WHOLE, RecordOptions(min_launches=7))) is MISS
    monkeypatch.setattr(result_cache, "code_fingerprint", lambda: b"other code")
    assert _session(synth).peek(q) is MISS and _session(synth).peek(tq.TimelineLanes(Options())) is MISS
    monkeypatch.undo()
    entry = s.entry
    tmp = entry.with_name("rebuilt.tmp")
    tmp.write_bytes(entry.read_bytes())
    os.replace(tmp, entry)                      # rebuilt as cache.save does: a new file
    assert Session(open_cached(synth).trace, entry).peek(q) is MISS   # a fresh load: disk only
    lanes = tq.TimelineLanes(Options())
    s = _session(synth)
    s.get(lanes)
    assert _session(synth).peek(lanes) is not MISS
    result_cache.mapped_path(s.entry, "lanes").write_bytes(b"garbage")   # a file that does not parse
    assert _session(synth).peek(lanes) is MISS


def test_the_model_entry_holds_only_the_model(synth):
    """The index is the session's (`<entry>.index`), not an attribute of the trace nor arrays in
    the model entry."""
    from launchtui.trace import flatfile
    from launchtui.trace.model import Trace
    s = _session(synth)
    assert not any(k.startswith("index") for k in flatfile.read(s.entry)[1])
    assert result_cache.mapped_path(s.entry, "index").is_file()
    assert {f.name for f in dataclasses.fields(Trace)}.isdisjoint({"index", "index_arrays", "cache_entry"})


def test_an_index_past_the_cache_bound_is_refused_before_it_is_built(synth, tmp_path, monkeypatch):
    """The index's stored arrays are counted from below without building them or its parts made
    on first use; a store that count already takes past the cache's bound is refused before
    `encode` runs, and one that fits is written as before."""
    from launchtui.analysis.index import build_index
    idx = build_index(open_cached(synth, use_cache=False).trace)
    at_least = idx.stored_bytes_at_least()
    assert idx._ops_by_api is None and idx._op_category is None   # nothing built to count
    stored = sum(a.nbytes for a in idx.to_arrays().values())
    assert 0.5 * stored < at_least <= stored
    entry = tmp_path / "e.model"
    entry.write_bytes(b"x" * 1_000_000)
    monkeypatch.setenv("LAUNCHTUI_CACHE_MAX_MB", str((1_000_000 + stored + 10) / 1e6))
    built = []

    def encode():
        built.append(1)
        return {}, idx.to_arrays()
    assert not result_cache.store_mapped(entry, "index", "k", encode, at_least=stored + 11)
    assert built == []
    assert result_cache.store_mapped(entry, "index", "k", encode, at_least=at_least)
    assert built == [1] and result_cache.mapped_path(entry, "index").exists()


def test_one_file_opened_by_another_path_finds_its_results(synth, tmp_path):
    """The model entry and the results are the file's, not the spelling of its path: a link to the
    trace (or its relative path) finds every result stored through the other, computes none, and
    the record names the path this session opened."""
    import os
    link = tmp_path / "linked.sqlite"
    os.symlink(synth, link)
    first = _session(synth)
    spelled = {name: (make(first), over) for name, (make, over) in QUERIES.items()}
    for q, over in spelled.values():
        first.get(q, over(first) if over else None)
    second = _session(str(link))
    assert second.entry == first.entry
    for name, (q, _) in spelled.items():
        got = second.peek(q)
        assert got is not MISS, f"{name}: missed through the link"
    doc, stalls = second.peek(Record(WHOLE, RecordOptions()))
    ref, ref_stalls = first.get(Record(WHOLE, RecordOptions()))
    assert doc["source"]["path"] == str(link) and ref["source"]["path"] == synth
    assert {**doc, "source": ref["source"]} == ref and _plain(stalls) == _plain(ref_stalls)
