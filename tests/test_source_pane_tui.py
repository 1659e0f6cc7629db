"""The call-site pane beside the kernel table (definitions.md §S3, §T): its rows against the generator's
ground truth, sorting, Enter highlighting exactly the site's launches (API calls and the ops they
launched), Esc, the no-stacks hint, 80 columns and the remappable switch key."""
from __future__ import annotations

from collections import Counter
from contextlib import asynccontextmanager
from pathlib import Path
import numpy as np
import pytest

from fixtures import stacks_synth
from conftest import sample
from tui_helpers import run, screen_text, settle, tui_args, wait_ready

STEPS = 3
WIDE, NARROW = (160, 50), (80, 24)
API_NS = 4_000          # every synthetic launch call lasts 4 µs (fixtures/stacks_synth.py)


@pytest.fixture(scope="module")
def stacked(tmp_path_factory):
    """A Kineto trace with python_function stacks and the call site of every launch."""
    from launchtui.trace.load import open_trace
    d = tmp_path_factory.mktemp("pane")
    path = d / "stacks.json"
    truth = stacks_synth.write(path, steps=STEPS)
    return path, truth, open_trace(path, use_cache=False)


def _expected(truth) -> Counter:
    return Counter(s for s in truth.site.values() if s is not None)


@asynccontextmanager
async def _started(path, trace, size=WIDE, **kw):
    """(app, pilot) of the TUI on `trace`, loaded and its workers done."""
    from launchtui.tui.app import LaunchApp
    app = LaunchApp(tui_args(Path(path).name), trace=trace, **kw)
    async with app.run_test(size=size) as pilot:
        await wait_ready(app, pilot)
        yield app, pilot


def _row(text: str, label: str) -> str:
    """The timeline row whose gutter label starts with `label` (API, HW)."""
    return next(ln for ln in text.splitlines() if ln.lstrip("▶").startswith(label))


@pytest.mark.tui
def test_pane_rows_equal_ground_truth(stacked):
    path, truth, trace = stacked
    want = _expected(truth)

    async def go():
        async with _started(path, trace) as (app, pilot):
            main = app.main
            assert main.sources.mode == "both"          # a trace with stacks, a wide terminal: beside
            rows = main.source_table.visible_rows()
            assert {r["site"]: r["launches"] for r in rows} == dict(want)
            counts = [r["launches"] for r in rows]
            assert counts == sorted(counts, reverse=True)
            for r in rows:
                assert r["launches_per_iteration"] == pytest.approx(want[r["site"]] / STEPS)
                assert r["launch_api_ms"] == pytest.approx(want[r["site"]] * API_NS / 1e6)
            n = len(truth.site)
            attributed = sum(want.values())
            await settle(app, pilot)
            text = screen_text(app)
            assert f"Call site · {attributed}/{n} attributed" in text
            assert "model.py:40 forward_0" in text
            # gemm_kernel and gemm_bw_kernel 3 times each: the tie goes to the first name (definitions.md §9)
            assert {r["site"]: r["top_kernel"] for r in rows}[stacks_synth.layer_site(0)] == "gemm_bw_kernel ×3"
            await pilot.press("w")                        # full width: the top kernel's column too
            await settle(app, pilot)
            assert main.sources.mode == "sources" and "gemm_bw_kernel ×3" in screen_text(app)
    run(go())


@pytest.mark.tui
def test_sorting_enter_highlights_the_sites_launches_and_esc_clears(stacked):
    path, truth, trace = stacked
    want = _expected(truth)

    async def go():
        async with _started(path, trace) as (app, pilot):
            main = app.main
            await pilot.press("tab", "tab")               # timeline → kernel table → call sites
            assert app.focused is main.source_table
            await pilot.press("1")                        # by call site, ascending
            sites = [r["site"] for r in main.source_table.visible_rows()]
            assert sites == sorted(want)
            await pilot.press("2")                        # by launches, descending
            assert [r["launches"] for r in main.source_table.visible_rows()] == sorted(want.values(), reverse=True)
            await pilot.press("1", "end")                 # the last site by name: train.py:31 optimizer_step
            row = main.source_table.selected_row()
            assert row["site"] == stacks_synth.SITE_OPTIM
            await pilot.press("enter")
            await settle(app, pilot)
            hl = main.timeline.highlight
            assert len(hl) == want[stacks_synth.SITE_OPTIM]
            # the launch calls of exactly those ops are marked on the API rows
            corr = {c for c, s in truth.site.items() if s == stacks_synth.SITE_OPTIM}
            assert sorted(trace.api.corr[trace.ops.api[hl.ops]].tolist()) == sorted(corr)
            marked = sorted(t for iv in hl.by_api_lane.values() for t in iv.s.tolist())
            assert marked == sorted(trace.api.start[np.isin(trace.api.corr, list(corr))].tolist())
            text = screen_text(app)
            assert f"{stacks_synth.SITE_OPTIM}: {len(corr)} launches highlighted" in text
            assert "◆" in _row(text, "API") and "◆" in _row(text, "HW")
            await pilot.press("n")
            assert "launch 2 (adam_kernel)" in main.context
            await pilot.press("escape")
            await settle(app, pilot)
            assert main.timeline.highlight is None
            text = screen_text(app)
            assert "◆" not in _row(text, "API") + _row(text, "HW")
    run(go())


@pytest.mark.tui
def test_no_stacks_the_pane_says_how_to_record_them():
    from launchtui.trace.load import open_trace
    path = Path(__file__).resolve().parents[1] / "fixtures" / "demo" / "demo.sqlite"
    trace = open_trace(path, use_cache=False)
    assert not len(trace.stacks)

    async def go():
        async with _started(path, trace) as (app, pilot):
            main = app.main
            assert main.sources.mode == "kernels"         # nothing to show: the pane waits for w
            await pilot.press("w")
            await settle(app, pilot)
            assert main.sources.mode == "both" and app.focused is main.source_table
            # the pane's column (right of its border), its lines joined
            text = " ".join(" ".join(ln.split("▏", 1)[1].split()) for ln in screen_text(app).splitlines()
                            if "▏" in ln)
            assert "torch.profiler.profile(with_stack=True)" in text
            assert "nsys profile --python-backtrace=cuda --cudabacktrace=all" in text
            assert f"0 of {main.stats['launches']:,} launches attributed (0.0 %)" in text
    run(go())


@pytest.mark.tui
def test_80_columns_the_pane_takes_the_whole_width_and_the_key_remaps(stacked):
    path, truth, trace = stacked

    async def go():
        async with _started(path, trace, NARROW, keymap={"source_pane": "x"}) as (app, pilot):
            main = app.main
            assert main.sources.mode == "kernels"         # too narrow to share the width
            await pilot.press("x")                        # remapped from w
            await settle(app, pilot)
            assert main.sources.mode == "sources" and app.focused is main.source_table
            await settle(app, pilot)
            text = screen_text(app)
            assert "Call site · 24/27 attributed" in text and "model.py:40 forward_0" in text
            assert "Kernel avg" not in text               # the kernel table gave the width up
            assert "call site 1/5" in text                # the details panel reads the site row
            await pilot.press("x")
            assert main.sources.mode == "kernels" and app.focused is main.table
    run(go())


def test_fit_site_keeps_file_line_and_function():
    from launchtui.tui.widgets.source_table import fit_site
    site = "vllm/model_executor/layers/fused_moe/layer.py:1696 forward_native"
    assert fit_site(site, 80) == site
    assert fit_site(site, 40).endswith("layer.py:1696 forward_native") and len(fit_site(site, 40)) == 40
    assert fit_site(site, 20) == "layer.py:1696 forwa…"


@pytest.mark.slow
@pytest.mark.tui
def test_a_selection_recomputes_the_pane(stacked):
    """o → ProfilerStep#2: the pane counts only the launches inside that range on its thread (§7), so
    not the autograd thread's backward launches: a third of each site's forward launches."""
    path, truth, trace = stacked
    want = Counter(s for c, s in truth.site.items() if s is not None and c not in truth.backward)

    async def go():
        async with _started(path, trace) as (app, pilot):
            main = app.main
            await pilot.press("o")
            await pilot.pause()
            await pilot.press(*"ProfilerStep#2", "enter")
            await settle(app, pilot)
            assert "ProfilerStep#2" in main.selection.label
            rows = main.source_table.visible_rows()
            assert {r["site"]: r["launches"] for r in rows} == {k: v // STEPS for k, v in want.items()}
            await pilot.press("tab", "tab", "1", "enter")   # model.py:40 forward_0, within the step
            await settle(app, pilot)
            assert len(main.timeline.highlight) == want[stacks_synth.layer_site(0)] // STEPS
    run(go())


@pytest.mark.tui
@pytest.mark.samples
def test_b200_pane_equals_the_cli_source_report(capsys):
    """The shared B200 eager trace: the pane's rows are `report --by source --json`'s, row for row."""
    import json

    from launchtui.cli import main as cli
    from launchtui.trace.load import open_trace
    path = sample("kineto/b200__eager_trace.json.gz")
    assert cli(["report", str(path), "--by", "source", "--json", "--limit", "0", "--no-cache"]) == 0
    want = [(s["site"], s["launches"], s["launch_api_ms"], s["small_launches"])
            for s in json.loads(capsys.readouterr().out)["sources"]["sites"]]
    trace = open_trace(path, use_cache=False)

    async def go():
        async with _started(path, trace) as (app, pilot):
            rows = app.main.source_table.visible_rows()
            assert [(r["site"], r["launches"], r["launch_api_ms"], r["small_launches"]) for r in rows] == want
            assert rows[0]["site"] == "flashinfer/fused_moe/core.py:1633 trtllm_fp4_block_scale_moe_op"
            await settle(app, pilot)
            assert "Call site · 768/768 attributed" in screen_text(app)
    run(go())


@pytest.mark.slow
@pytest.mark.tui
def test_narrowing_the_terminal_keeps_the_focused_table(stacked):
    """Beside at 160 columns; at 80 the pane and the kernel table no longer share: the focused one stays."""
    path, truth, trace = stacked

    async def go():
        async with _started(path, trace) as (app, pilot):
            main = app.main
            await pilot.press("tab", "tab")
            assert main.sources.mode == "both" and app.focused is main.source_table
            await pilot.resize_terminal(*NARROW)
            await settle(app, pilot)
            assert main.sources.mode == "sources" and app.focused is main.source_table
            await pilot.press("w")                     # at 80 columns: sites → kernels, no "both"
            assert main.sources.mode == "kernels" and app.focused is main.table
            await pilot.press("w")
            assert main.sources.mode == "sources"
    run(go())
