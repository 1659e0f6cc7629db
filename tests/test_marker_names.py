"""pyprof's and DLProf's NVTX markers (the repr of a Python dict per op) are shown by their op and
call site, while grouping and JSON keep their text (definitions.md §V5, shown name)."""
from __future__ import annotations

import json

import pytest

from launchtui.analysis.prose import marker_name, short

LIB = "/home/u/.local/lib/python3.6/site-packages/torch/nn/modules"
DLPROF_CONV1 = (f"{{'traceMarker': ['net.py:41', '{LIB}/module.py:1102', 'net.py:25', '{LIB}/module.py:1102', "
                f"'{LIB}/conv.py:446', '{LIB}/conv.py:443'], 'funcStack': '/<module>/net::_call_impl/net::forward/"
                "Conv2d::_call_impl/Conv2d::forward/Conv2d::_conv_forward/conv2d'}")
WINDOWS = (DLPROF_CONV1.replace("'net.py:25', ", "'C:\\\\src\\\\net.py:25', ")   # as repr doubles a backslash
           .replace(LIB, "C:\\\\py\\\\Lib\\\\site-packages"))
PYPROF_ARGS = ("{'mod': 'torch.nn.functional', 'op': 'conv2d', 'args': [{'name': '', 'type': 'tensor', "
               "'shape': (64, 3, 224, 224), 'dtype': 'float32'}]}")


@pytest.mark.parametrize("text, shown", [
    (DLPROF_CONV1, "conv2d (net.py:25)"),                  # the innermost frame outside the libraries
    (DLPROF_CONV1.replace("'net.py:25', ", "'/srv/app/train/net.py:25', "), "conv2d (net.py:25)"),
    (WINDOWS, "conv2d (net.py:25)"),                       # Windows paths, as repr writes them
    (PYPROF_ARGS, "torch.nn.functional.conv2d"),           # the same op with other shapes: one name
    ("{'op': 'relu', 'args': []}", "relu"),
    (f"{{'traceMarker': ['{LIB}/module.py:1102'], 'funcStack': '/<module>/f/add_'}}", "add_"),
    ("{'mod': 'Conv2d', 'strRepr': 'Conv2d(3, 6, kernel_size=(5, 5))'}",   # a module marker: no op
     "{'mod': 'Conv2d', 'strRepr': 'Conv2d(3, 6, kernel_size=(5, 5))'}"),
    ("{'traceMarker': ['a.py:3'], 'funcStack': ''}", "{'traceMarker': ['a.py:3'], 'funcStack': ''}"),
    ("aten::mul", "aten::mul"), ("{'a': 1}", "{'a': 1}"), ("## forward ##", "## forward ##"),
    ("", ""),
])
def test_marker_name(text, shown):
    assert marker_name(text) == shown


def test_short_shows_the_marker_name_then_elides():
    assert short(DLPROF_CONV1, 40) == "conv2d (net.py:25)"
    assert short(DLPROF_CONV1, 10) == "conv2d (n…"
    assert short("x" * 45, 40) == "x" * 39 + "…"


@pytest.mark.samples
def test_dlprof_phases_read_by_op_and_line_in_prose_and_by_text_in_json(capsys):
    """The DLProf export's two phases are its two conv layers: in Markdown each by its line (their
    first 40 characters used to be the same), in JSON by the marker's whole text."""
    from conftest import sample
    from launchtui.cli import main
    p = sample("nsys/MohanadOdema__DLProf__nsys_profile.sqlite")
    assert main(["record", str(p), "--json", "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    phases = [x["phase"] for x in doc["idle_by_cause"]["by_phase"]]
    assert len(phases) == 2 and all(x.startswith("{'traceMarker': ['dummy_network.py:41'") for x in phases)
    assert [marker_name(x) for x in phases] == ["conv2d (dummy_network.py:25)", "conv2d (dummy_network.py:26)"]
    assert main(["record", str(p), "--no-cache"]) == 0
    page = capsys.readouterr().out
    assert ("Host-bound time by phase: `conv2d (dummy_network.py:25)` 1.128 ms/iter · "
            "`conv2d (dummy_network.py:26)` 0.332 ms/iter") in page
    assert "traceMarker" not in page


def test_the_table_shows_sorts_and_sizes_the_phase_by_its_shown_name():
    from launchtui.tui.widgets.kernel_table import KernelTable
    row = dict(kernel_name="k", launch_count=10, avg_api_us=5.0, avg_kernel_us=2.0, total_api_ms=0.05,
               avg_queue_us=1.0, max_api_us=6.0, queue_count=10, device_id=0, nvtx_share=1.0)
    t = KernelTable()
    t.set_rows([dict(row, kernel_name="a", nvtx_range=DLPROF_CONV1),
                dict(row, kernel_name="b", nvtx_range="zero_grad")])
    assert t._need[1] == len("conv2d (net.py:25)")     # the shown name's width, not the text's
    t.sort_by("nvtx_range", descending=False)
    assert [r["kernel_name"] for r in t.visible_rows()] == ["a", "b"]   # "conv2d (...)" < "zero_grad" < "{'..."


def test_the_cursor_line_names_the_phase_by_its_shown_name():
    from launchtui.tui.details import phase_text
    assert phase_text(DLPROF_CONV1, 0.9) == "mostly launched inside conv2d (net.py:25) (90 % of launches)"


@pytest.mark.samples
@pytest.mark.tui
def test_the_timeline_labels_a_marker_range_by_its_shown_name():
    from conftest import sample_model
    from tui_helpers import make_app, run, screen_text, wait_ready
    app = make_app("dlprof.sqlite", trace=sample_model("nsys/MohanadOdema__DLProf__nsys_profile.sqlite"))

    async def go():
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_ready(app, pilot)
            return screen_text(app)
    text = run(go())
    assert "[conv2d (dummy_network.py:25)" in text and "[torch.nn.functional.conv2d" in text
    assert "traceMarker" not in text and "{'mod'" not in text


@pytest.mark.samples
def test_the_cursor_lines_name_marker_ranges_and_paths_by_their_shown_names():
    """At the cursor and on a chosen range, the NVTX path reads op by op; an emit_nvtx name inside
    it stays as recorded (the shown name touches markers only)."""
    from conftest import sample_model
    from launchtui.analysis import nvtx
    from launchtui.tui.details import _nvtx_path, describe_range
    t = sample_model("nsys/MohanadOdema__DLProf__nsys_profile.sqlite")
    rg = t.ranges
    texts = [t.strings[int(x)] for x in rg.text]
    inner = next(i for i, x in enumerate(texts) if x.startswith("aten::conv2d"))
    path = [texts[j] for j in nvtx.range_path(t, inner)]
    assert [p[:14] for p in path[:2]] == ["{'traceMarker'", "{'mod': 'torch"]
    line = _nvtx_path(t, int(rg.thread[inner]), int(rg.start[inner]) + 1)
    assert line.startswith("NVTX: conv2d (dummy_network.py:25) > torch.nn.functional.conv2d > "
                           "aten::conv2d, seq = 0")
    outer = int(nvtx.range_path(t, inner)[0])
    lines = describe_range(t, outer, None)
    assert lines[0].startswith("range conv2d (dummy_network.py:25)  ")
    assert lines[1] == "path: conv2d (dummy_network.py:25)" and all("traceMarker" not in x for x in lines)
