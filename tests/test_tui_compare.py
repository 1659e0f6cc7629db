"""`launchtui BEFORE --compare AFTER`: the compare view on a synthetic before/after pair (Pilot)."""
from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

from fixtures import pairs
from tui_helpers import ROOT, run, screen_text, wait_ready

pytestmark = pytest.mark.tui

SIZE = (120, 44)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return pairs.write_pair(tmp_path_factory.mktemp("cmp"), "fused")


def _app(b, a, **kw):
    from launchtui.tui.compare import CompareApp
    args = dict(trace=str(b), compare=str(a), trim=None, device="all", nvtx=None, no_cache=True, iter=None)
    args.update(kw)
    return CompareApp(SimpleNamespace(**args))


def test_compare_view_aligns_iterations_and_shows_the_diff(pair, tmp_path):
    b, a = pair

    async def go():
        app = _app(b, a)
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
            scr = app.main
            doc = scr.doc
            txt = screen_text(app)
            (tmp_path / "compare.txt").write_text(txt)
            assert "BEFORE: " in txt and "AFTER: " in txt
            assert "iteration 1 of 4" in txt
            assert "Verdict: " + doc["verdict"]["line"][:60] in txt
            assert "launches/iter 482.0 → 102.0" in txt
            assert "elementwise_kernel<SqrtFunctor>" in txt and "gone" in txt
            assert "multi_tensor_apply_kernel<FusedAdamMathFunctor>" in txt and "new" in txt
            # both timelines show iteration k of their own run
            tb, ta = scr.timelines
            sb, sa = scr.spans

            def shown(tl, span):
                v = tl.view
                return v.start <= span[0] and v.start + v.ns_per_col * v.width >= span[1]
            assert shown(tb, sb[0]) and shown(ta, sa[0])
            await pilot.press("right_curly_bracket")
            await pilot.pause()
            assert scr.k == 1 and shown(tb, sb[1]) and shown(ta, sa[1])
            assert "iteration 2 of 4" in screen_text(app)
            for _ in range(5):
                await pilot.press("right_curly_bracket")
            await pilot.pause()
            assert scr.k == 3
            await pilot.press("left_curly_bracket")
            await pilot.pause()
            assert scr.k == 2 and shown(ta, sa[2])
            await pilot.press("q")
        assert app.return_code in (0, None)
    run(go())


def test_compare_loading_error_is_one_line_exit_2(pair, tmp_path):
    b, _ = pair
    r = subprocess.run([sys.executable, "-m", "launchtui", str(b), "--compare", str(tmp_path / "nope.json")],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 2
    # the TUI drew its loading frame on the terminal first; the message is the last line
    assert r.stderr.rstrip().endswith(f"\nlaunchtui: {tmp_path / 'nope.json'}: no such file") or \
        r.stderr.rstrip().endswith(f"launchtui: {tmp_path / 'nope.json'}: no such file")
    assert "Traceback" not in r.stderr


def test_compare_view_after_report_reads_each_sides_record(pair, tmp_path, monkeypatch, capsys):
    """After `report --json` of each side the compare view finds both records stored and computes
    neither; its diff is the one read afresh."""
    import launchtui.analysis.record as record_mod
    from launchtui.analysis.diff_inputs import diff_document
    from launchtui.cli import main
    from launchtui.trace.load import read_trace
    b, a = pair
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    fresh = diff_document(read_trace(str(b)), read_trace(str(a)))
    for side in (b, a):
        assert main(["report", str(side), "--json"]) == 0
    capsys.readouterr()
    computed = []
    real = record_mod.record_with_streams
    monkeypatch.setattr(record_mod, "record_with_streams",
                        lambda trace, sel, opt, shared=None: computed.append(1) or real(trace, sel, opt, shared))

    async def go():
        app = _app(b, a, no_cache=False)
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
            assert app.main.doc == fresh
            await pilot.press("q")
    run(go())
    assert computed == []
