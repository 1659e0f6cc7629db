"""The cache is loaded as launchtui's own (pickles, mapped arrays), so it is used only in a directory
that belongs to the user and that neither group nor others may write: otherwise one line says so
and the run works without it, writing nothing there (definitions.md §H, issue 27)."""
from __future__ import annotations

import os

import pytest

from conftest import ROOT
from launchtui.cli import main

DEMO = ROOT / "fixtures/demo/demo.sqlite"


def _run(args, capsys):
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("how", ["group-writable", "world-writable", "other owner"])
def test_an_untrusted_cache_directory_is_not_used(how, tmp_path, capsys, monkeypatch):
    base = tmp_path / "xdg"
    d = base / "launchtui"
    d.mkdir(parents=True)
    if how == "group-writable":
        d.chmod(0o770)
    elif how == "world-writable":
        d.chmod(0o777)
    else:
        if os.getuid() != 0:
            pytest.skip("changing a directory's owner needs root")
        os.chown(d, 54321, 54321)
        d.chmod(0o700)
    monkeypatch.setenv("XDG_CACHE_HOME", str(base))
    rc, out, err = _run(["report", "--json", DEMO], capsys)
    assert rc == 0 and out.startswith("{")
    want = "belongs to another user" if how == "other owner" else "is writable by group or others"
    assert err == f"launchtui: cache directory {d} {want}: not using it (no cache this run)\n"
    assert list(d.iterdir()) == [], "nothing written into the untrusted directory"
    rc2, out2, _ = _run(["report", "--json", DEMO], capsys)
    assert rc2 == 0 and out2 == out


def test_a_private_cache_directory_is_created_private_and_used(tmp_path, capsys, monkeypatch):
    base = tmp_path / "fresh"
    monkeypatch.setenv("XDG_CACHE_HOME", str(base))
    rc, out, err = _run(["report", "--json", DEMO], capsys)
    d = base / "launchtui"
    assert rc == 0 and err == ""
    assert (d.stat().st_mode & 0o777) == 0o700 and any(d.iterdir())
