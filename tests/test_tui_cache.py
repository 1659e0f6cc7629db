"""The TUI's load caches the model and, beside it, its typed index (as the CLI does), so the next
open maps the index instead of rebuilding it; a load that fails on a bad option writes nothing."""
import pytest

from launchtui.errors import TraceError
from launchtui.trace import cache, flatfile
from launchtui.tui.loader import load
from tests.tui_helpers import tui_args

DEMO = "fixtures/demo/demo.sqlite"


def test_tui_load_caches_the_index_and_the_next_open_restores_it(monkeypatch):
    from launchtui.analysis import index
    first = load(tui_args(DEMO, no_cache=False))
    (entry,) = cache.models_dir().glob("*.model")
    _, arrays = flatfile.read(entry.with_name(entry.name + ".index"))
    assert {"op_ranges", "depth_before_launch", "qs.meta"} <= set(arrays)
    assert not any(k.startswith("index.") for k in flatfile.read(entry)[1])   # the model holds only the model
    built = []
    monkeypatch.setattr(index, "build_index", lambda tr: built.append(tr))
    second = load(tui_args(DEMO, no_cache=False))
    assert not built and not index.attached(second.trace).op_ranges.flags.owndata   # mapped, then used
    assert (index.attached(second.trace).op_ranges == index.attached(first.trace).op_ranges).all()
    assert len(second.marks) == len(first.marks) and second.fit_window == first.fit_window


def test_tui_load_failing_on_a_bad_option_writes_nothing():
    with pytest.raises(TraceError):
        load(tui_args(DEMO, no_cache=False, trim="900:1000"))
    assert not cache.models_dir().is_dir() or not list(cache.models_dir().glob("*.model"))
