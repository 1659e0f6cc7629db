"""The TUI's load caches the model with its typed index (committed after the index is built, as the
CLI does), so the next open restores the index from the memory-mapped entry instead of rebuilding it;
a load that fails on a bad option writes nothing."""
import pytest

from launchtui.errors import TraceError
from launchtui.trace import cache, flatfile
from launchtui.tui.loader import load
from tests.tui_helpers import tui_args

DEMO = "fixtures/demo/demo.sqlite"


def test_tui_load_caches_the_index_and_the_next_open_restores_it():
    first = load(tui_args(DEMO, no_cache=False))
    (entry,) = cache.models_dir().glob("*.model")
    _, arrays = flatfile.read(entry)
    assert {"index.op_ranges", "index.depth_before_launch", "index.qs.meta"} <= set(arrays)
    second = load(tui_args(DEMO, no_cache=False))
    assert second.trace.index is not None and second.trace.index_arrays is None   # restored, then used
    assert (second.trace.index.op_ranges == first.trace.index.op_ranges).all()
    assert len(second.marks) == len(first.marks) and second.fit_window == first.fit_window


def test_tui_load_failing_on_a_bad_option_writes_nothing():
    with pytest.raises(TraceError):
        load(tui_args(DEMO, no_cache=False, trim="900:1000"))
    assert not cache.models_dir().is_dir() or not list(cache.models_dir().glob("*.model"))
