"""`--capture` where the command would not use it is refused with one line and exit 2, never
ignored (docs/definitions.md §12.6): `report --by source` ranks the call sites of eager launches and
`launchtui A --compare B` aligns two timelines; neither labels replayed kernels."""
from __future__ import annotations

import pytest

from fixtures import graph_join_cases as gjc
from launchtui.cli import main


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return gjc.write("full", tmp_path_factory.mktemp("full"), None, False)[:2]


@pytest.mark.parametrize("argv, where", [
    (lambda cap, ex: ["report", str(ex), "--by", "source", "--capture", str(cap)], "--by source"),
    (lambda cap, ex: [str(ex), "--compare", str(ex), "--capture", str(cap)], "--compare"),
])
def test_unused_capture_is_refused_in_one_line(pair, argv, where, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cap, ex = pair
    assert main(argv(cap, ex)) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"launchtui: {cap}: --capture is not used with {where}: it labels replayed kernels in the "
                   "kernel report, the record and the single-trace TUI\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing written"


def test_by_source_without_capture_still_runs(pair, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert main(["report", str(pair[1]), "--by", "source", "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "-- Call sites of kernel launches (innermost user frame) --" in out
    assert "0 of 15 launches attributed to a user frame (0.0 %); 0 have a stack" in out
