"""The TUI's export key and its odd inputs (Pilot, 120×40): `e` writes the bytes `launchtui export`
writes for the same range and options; traces without NVTX or kernels, a load error, a bad device,
--trim, NO_COLOR and remapped keys. The rest of the TUI's keys: test_tui.py."""
from __future__ import annotations

import gzip
import json

import pytest

from tui_helpers import make_app, record_notifications, run, screen_text, settle, small_synth, wait_ready

pytestmark = pytest.mark.tui

SIZE = (120, 40)


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    return small_synth(tmp_path_factory)


def _app(synth, **kw):
    return make_app(synth["nsys"], trace=synth["trace"], **kw)


def _shown_options(dlg) -> list[str]:
    """The options of the dialog's "same as" command (the screen's table and verdict settings),
    without its --trim, --device and -o."""
    import shlex
    words = shlex.split(dlg.commands["launchtui"])[3:]
    out, i = [], 0
    while i < len(words):
        if words[i] in ("--trim",):
            i += 3
        elif words[i] in ("-o", "--device"):
            i += 2
        else:
            out.append(words[i])
            i += 1
    return out


def _cli_export(path, a_s, b_s, out, *extra):
    from launchtui.cli import main
    rc = main(["export", str(path), "--trim", repr(a_s), repr(b_s), "-o", str(out), *extra])
    assert rc == 0
    return out.read_bytes()


@pytest.mark.slow
def test_e_writes_the_same_file_as_launchtui_export(synth, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    async def go():
        app = _app(synth)
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
            await pilot.press("b", "b", "b")          # somewhere busy
            await pilot.press("minus", "minus")
            await pilot.press("v", *["l"] * 8, "v")
            await settle(app, pilot)
            t0, t1 = app.main.timeline.sel_range
            assert t1 > t0 and app.main.selection.t0 == t0
            notes = record_notifications(app)
            await pilot.press("e")
            await pilot.pause()
            from launchtui.tui.screens import ConfirmScreen, ExportDialog
            dlg = app.screen
            assert isinstance(dlg, ExportDialog)
            default = dlg.default_name
            assert default.startswith("synth.") and default.endswith(".launchtui.json")
            shown = _shown_options(dlg)
            assert shown == ["--min-launches", "100", "--max-avg-us", "10", "--limit", "0", "--names", "short",
                             "--phase-level", "1"]
            inp = dlg.query_one("#export-path")
            inp.value = str(tmp_path / "tui.json")
            await pilot.press("enter")
            await settle(app, pilot)
            assert (tmp_path / "tui.json").exists()
            a_s, b_s = t0 / 1e9, t1 / 1e9
            cli = _cli_export(synth["nsys"], a_s, b_s, tmp_path / "cli.json", *shown)
            assert (tmp_path / "tui.json").read_bytes() == cli
            doc = json.loads(cli)
            assert doc["window"]["t0_ns"] == round(a_s * 1e9) and doc["counts"]["gpu_ops"] > 0
            # notification names the path
            assert any("wrote" in n and "tui.json" in n for n in notes)
            # again onto the same name: asks, and 'n' leaves the file alone
            before = (tmp_path / "tui.json").read_bytes()
            await pilot.press("e")
            await pilot.pause()
            app.screen.query_one("#export-path").value = str(tmp_path / "tui.json")
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("n")
            await settle(app, pilot)
            assert (tmp_path / "tui.json").read_bytes() == before
            # no range: the visible window, with the device filter, into the default name
            await pilot.press("escape", "d")
            await settle(app, pilot)
            assert app.main.device == 0
            v0, v1 = int(app.main.timeline.view.start), int(app.main.timeline.view.end)
            await pilot.press("e")
            await pilot.pause()
            name = app.screen.default_name
            await pilot.press("enter")
            await settle(app, pilot)
            cli = _cli_export(synth["nsys"], v0 / 1e9, v1 / 1e9, tmp_path / "cli2.json", "--device", "0", *shown)
            assert (tmp_path / name).read_bytes() == cli
    run(go())


def test_trace_without_nvtx_opens_and_says_so(synth, tmp_path):
    """Kineto JSON with the user annotations removed: the engine reports the gap, the app shows it."""
    from launchtui.trace.load import open_trace
    with gzip.open(synth["kineto"], "rt") as f:
        doc = json.load(f)
    doc["traceEvents"] = [e for e in doc["traceEvents"]
                          if e.get("cat") not in ("user_annotation", "gpu_user_annotation")]
    p = tmp_path / "no_nvtx.json"
    p.write_text(json.dumps(doc))
    tr = open_trace(p, use_cache=False)
    assert not len(tr.ranges) and tr.missing

    async def go():
        app = make_app(p, trace=tr)
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
            txt = screen_text(app)
            assert "missing: " + tr.missing[0][:40] in txt and "NVTX: none in this trace" in txt
            assert not any(r.kind == "nvtx" for r in app.main.timeline.rows)
            assert any(r.kind == "hw" for r in app.main.timeline.rows) and app.main.table.rows
            notes = record_notifications(app)
            await pilot.press("O")
            await pilot.pause()
            assert "no optimizer range" in screen_text(app)
            assert any("No optimizer phase" in n for n in notes)
    run(go())


def test_trace_without_kernels_opens_and_says_so(synth, tmp_path):
    from fixtures.synth import write_nsys_sqlite
    p = write_nsys_sqlite(synth["w"], tmp_path / "no_kernels.sqlite", variant="no_kernels")

    async def go():
        app = make_app(p)
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
            txt = screen_text(app)
            assert "missing: no CUDA kernel table" in txt
            assert "No small-and-frequent kernel launch data found" in txt
            kinds = {r.kind for r in app.main.timeline.rows}
            assert "hw" not in kinds and "api" in kinds     # launch calls still drawn
            assert "no GPU ops" in txt
            # keys still work: zoom, a range, and export says why there is nothing to write
            notes = record_notifications(app)
            npc = app.main.timeline.view.ns_per_col
            await pilot.press("plus")
            assert app.main.timeline.view.ns_per_col == pytest.approx(npc / 2)
            await pilot.press("v", "l", "l", "v")
            a, b = app.main.timeline.sel_range
            assert b > a
            await pilot.press("e")
            assert any("no GPU ops" in n for n in notes)
            assert app.screen is app.main          # no dialog over the view
    run(go())


def test_loading_error_exits_with_status_2_and_the_cli_message(tmp_path):
    bad = tmp_path / "nope.sqlite"

    async def go():
        app = make_app(bad)
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
        return app

    app = run(go())
    assert app.return_code == 2
    from launchtui.errors import TraceError
    from launchtui.trace.load import open_trace
    with pytest.raises(TraceError) as e:
        open_trace(bad)
    assert app.error_message == str(e.value)


def test_bad_device_argument_is_a_usage_error(synth):
    async def go():
        app = _app(synth, device="7")
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
        return app
    app = run(go())
    assert app.return_code == 2 and "--device 7: no such device" in app.error_message


def test_trim_argument_selects_and_frames_the_window(synth):
    async def go():
        app = _app(synth, trim=[1.505, 1.52])
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
            assert app.main.timeline.sel_range == (1_505_000_000, 1_520_000_000)
            assert app.main.selection.label == "1.505–1.52 s"
            v = app.main.timeline.view
            assert v.start <= 1_505_000_000 and v.end >= 1_520_000_000
            assert v.end - v.start < 30_000_000
    run(go())


def test_no_color_renders_and_meaning_survives_without_colour(synth, monkeypatch):
    """NO_COLOR: Textual's monochrome filter runs over every segment; symbols still carry meaning."""
    monkeypatch.setenv("NO_COLOR", "1")

    async def go():
        app = _app(synth)
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
            await pilot.press("b", "b", "plus")
            await settle(app, pilot)
            txt = screen_text(app)
            svg = app.export_screenshot()
            assert "q s7" in txt and "!" in txt and "█" in txt     # ≥ threshold and spikes: glyphs
            assert "#ff3030" not in svg                              # the red of saturated cells is gone
    run(go())


def test_keys_can_be_remapped_by_binding_id(synth, monkeypatch):
    monkeypatch.setenv("LAUNCHTUI_KEYS", "pan_left=a;zoom_in=z")

    async def go():
        app = _app(synth)
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
            v = app.main.timeline.view
            c0, npc = v.cursor, v.ns_per_col
            await pilot.press("a")
            assert v.cursor < c0
            await pilot.press("z")
            assert v.ns_per_col == pytest.approx(npc / 2)
    run(go())
