"""nsys_scan_shares: the shares of the API and GPU-op scans offered to the NVTX worker leave the
three threads even work (or as even as offers can make it), and the NVTX weight follows the share
of its rows with an inline text."""
from __future__ import annotations

import sqlite3

import pytest

from launchtui.trace.nsys_scan_shares import (MAX_SHARE, NVTX_ROW_VALUES, NVTX_TEXT_VALUES, ScanShares,
                                              ScanWeights, _text_share, scan_shares, scan_weights)


def loads(w: ScanWeights, s: ScanShares) -> tuple[float, float, float]:
    """(main, GPU worker, NVTX worker) once the shares moved: independent arithmetic."""
    return (w.api * (1 - s.api) + w.overheads, w.gpu * (1 - s.gpu), w.nvtx + w.api * s.api + w.gpu * s.gpu)


@pytest.mark.parametrize("w", [ScanWeights(5.06, 0.0, 8.03, 0.22),   # the generator's export
                               ScanWeights(10.1, 0.0, 8.03, 0.22),   # an event record after each call
                               ScanWeights(6.0, 1.0, 6.0, 1.0)])
def test_the_nvtx_worker_takes_from_both_to_even_three_threads(w):
    s = scan_shares(w)
    assert 0 < s.api < MAX_SHARE and 0 < s.gpu < MAX_SHARE
    third = (w.api + w.overheads + w.gpu + w.nvtx) / 3
    assert loads(w, s) == pytest.approx((third, third, third))


def test_api_heavy_meets_the_nvtx_worker_halfway_and_keeps_the_kernels_whole():
    w = ScanWeights(api=10.0, overheads=0.0, gpu=4.4, nvtx=0.5)   # three calls per kernel
    s = scan_shares(w)
    main, gpu, nvtx = loads(w, s)
    assert s.gpu == 0 and main == pytest.approx(nvtx) and gpu < main


def test_gpu_heavy_meets_the_nvtx_worker_halfway_and_keeps_the_calls_whole():
    w = ScanWeights(api=1.0, overheads=0.0, gpu=10.0, nvtx=0.0)
    s = scan_shares(w)
    assert s == ScanShares(0.0, 0.5)


def test_heavy_nvtx_ranges_take_no_offer():
    """nsys-ai's exports: 2.5-3x as many ranges as calls, nearly all with inline text."""
    assert scan_shares(ScanWeights(api=5.0, overheads=0.0, gpu=4.4, nvtx=45.0)) == ScanShares(0.0, 0.0)


def test_no_gpu_ops_leave_that_worker_free_for_half_the_calls():
    assert scan_shares(ScanWeights(api=8.0, overheads=0.0, gpu=0.0, nvtx=0.0)) == ScanShares(0.5, 0.0)
    assert scan_shares(ScanWeights(api=0.0, overheads=0.0, gpu=0.0, nvtx=3.0)) == ScanShares(0.0, 0.0)


def test_the_owner_keeps_a_tenth_at_least():
    s = scan_shares(ScanWeights(api=0.0001, overheads=100.0, gpu=50.0, nvtx=0.0))
    assert s.api == MAX_SHARE


def _nvtx_db(tmp_path, texts: list):
    con = sqlite3.connect(tmp_path / "n.sqlite")
    con.execute("CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, text TEXT)")
    con.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, ?)", [(i, i + 1, t) for i, t in enumerate(texts)])
    con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER)")
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?)", [(i, i + 1) for i in range(300)])
    con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER, end INTEGER)")   # empty
    con.commit()
    return con


@pytest.mark.parametrize("every", [1, 4, 0])
def test_the_text_share_is_sampled_at_three_places(tmp_path, every):
    texts = [("r" if every and i % every == 0 else None) for i in range(5000)]
    con = _nvtx_db(tmp_path, texts)
    share = _text_share(con, "NVTX_EVENTS")
    assert share == pytest.approx(1 / every if every else 0.0, abs=0.01)
    w = scan_weights(con, api="CUPTI_ACTIVITY_KIND_RUNTIME", nvtx="NVTX_EVENTS", gpu=("CUPTI_ACTIVITY_KIND_MEMSET",))
    assert w == ScanWeights(api=300 * 5, overheads=0, gpu=0, nvtx=5000 * (NVTX_ROW_VALUES + NVTX_TEXT_VALUES * share))


def test_sparse_rowids_offer_nothing(tmp_path):
    con = _nvtx_db(tmp_path, ["r"] * 10)
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME(rowid, start, end) VALUES (10000000000, 1, 2)")
    assert scan_weights(con, api="CUPTI_ACTIVITY_KIND_RUNTIME") is None
