"""Shared test fixtures: paths to ../shared (optional) and the synthetic generator.

A test that reads ../shared carries the `samples` marker and reaches the folder only through the
`shared` fixture, `sample(...)` or `optional_shared()`: absent, it is skipped, or it fails when
LAUNCHTUI_REQUIRE_SHARED=1 (CI), so that CI cannot mistake "absent" for "passed"."""
from __future__ import annotations

import contextlib
import itertools
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LAUNCHTUI_SHARED") or Path(__file__).resolve().parents[2] / "shared")
SKIP_SHARED = "../shared not found: real-sample tests need the shared reference folder"
REQUIRE_SHARED = os.environ.get("LAUNCHTUI_REQUIRE_SHARED", "") not in ("", "0")

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fixtures import kineto_writer  # noqa: E402

kineto_writer.SMALL_GZIP_LEVEL = 1  # generated traces are read, never kept: the fastest gzip level


def _short_idle_slices(slice_s: float = 0.005) -> None:
    """Textual's `Pilot.pause()` returns after one slice of SLEEP_GRANULARITY (20 ms) in which the
    process used under 1/20 of it in CPU; the Pilot tests pause hundreds of times, so most of their
    wall time was these slices. A 5 ms slice keeps the same rule (a slice with CPU use still waits)
    and the tests still drain every worker (tests/tui_helpers.py). Nothing when Textual has no such
    module (the tests only wait longer)."""
    try:
        from textual import _wait
    except ImportError:
        return
    if hasattr(_wait, "SLEEP_GRANULARITY") and hasattr(_wait, "SLEEP_IDLE"):
        _wait.SLEEP_GRANULARITY = slice_s
        _wait.SLEEP_IDLE = slice_s / 20


_short_idle_slices()

_running: list = [None]  # the test being set up, run or torn down


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _running[0] = item  # before any fixture: a module fixture's sample() is checked against this test
    if "shared" in item.fixturenames:
        _uses_shared()      # the session fixture's body runs for the first such test only


def pytest_report_header(config):
    state = "present" if SHARED.is_dir() else "ABSENT"
    return f"shared: {SHARED} ({state}; LAUNCHTUI_REQUIRE_SHARED={'1' if REQUIRE_SHARED else 'unset'})"


def _uses_shared() -> None:
    item = _running[0]
    if item is not None and item.get_closest_marker("samples") is None:
        pytest.fail(f"{item.nodeid} reads ../shared but is not marked: add @pytest.mark.samples", pytrace=False)


def _absent(reason: str):
    if REQUIRE_SHARED:
        pytest.fail(f"{reason} (LAUNCHTUI_REQUIRE_SHARED=1; LAUNCHTUI_SHARED={SHARED})", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def _cache_dirs(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("xdg-caches")


_CACHE_DIR_NUMBERS = itertools.count()


@pytest.fixture(autouse=True)
def _isolated_cache(_cache_dirs, monkeypatch):
    """Every test gets its own per-user cache directory: a new numbered folder in one parent (not a
    `mktemp` each, which scans the run's whole temporary folder every time)."""
    d = _cache_dirs / str(next(_CACHE_DIR_NUMBERS))
    d.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(d))


@pytest.fixture(scope="session")
def shared() -> Path:
    _uses_shared()
    if not SHARED.is_dir():
        _absent(SKIP_SHARED)
    return SHARED


def sample(rel: str) -> Path:
    _uses_shared()
    p = SHARED / "samples" / rel
    if not p.exists():
        _absent(SKIP_SHARED if not SHARED.is_dir() else f"sample {rel} missing from ../shared")
    return p


def _run_root(tmp_path_factory) -> Path:
    """This run's temporary root: shared by its xdist workers (their base temps' parent)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory, name: str, build):
    """`build(folder)`'s result (paths in `folder`), built once per run: the first xdist worker to ask
    makes the folder, the others wait on a lock and reuse it. For generated inputs that tests only
    read: the generator is deterministic, so each worker would have written the same bytes."""
    import fcntl
    import pickle
    import shutil
    root = _run_root(tmp_path_factory)
    folder, done = root / f"built-{name}", root / f"built-{name}.pickle"
    with open(root / f"built-{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # released when the file closes
        if done.exists():
            return pickle.loads(done.read_bytes())
        shutil.rmtree(folder, ignore_errors=True)   # left half-made by a worker that failed
        folder.mkdir()
        out = build(folder)
        done.write_bytes(pickle.dumps(out))
        return out


def synth_all(tmp_path_factory) -> dict:
    """Every variant of the default synthetic workload (fixtures.synth.make_trace_files), written once
    per run: {(format, variant): path}."""
    from fixtures import synth
    return built_once(tmp_path_factory, "synth-all", lambda d: synth.make_trace_files(d, variants="all"))


_MODEL_CACHE_ENV = "LAUNCHTUI_TEST_MODEL_CACHE"   # this run's shared model cache (_shared_model_cache)


@pytest.fixture(scope="session", autouse=True)
def _shared_model_cache(tmp_path_factory):
    """One model cache for the whole run, shared by its xdist workers (their base temps' parent):
    `sample_model` reads each sample once per run, not once per test."""
    d = _run_root(tmp_path_factory) / "shared-model-cache"
    d.mkdir(mode=0o700, exist_ok=True)
    os.environ[_MODEL_CACHE_ENV] = str(d)   # read by both module copies (`conftest`, `tests.conftest`)


def sample_model(rel: str):
    """The model of the sample `rel` through the product's model cache, shared by this run's tests:
    the first ask reads the file and stores the model, later ones map it (the warm open every user
    gets; tests/test_cache_export.py holds it equal to a read). Each call is a new `Trace`, so no
    derived result carries over between tests. For tests about the analyses of a sample, not its
    reading: a test that changes how a file is read reads it itself."""
    from launchtui.trace.load import open_trace
    path = sample(rel)
    with cache_home(os.environ[_MODEL_CACHE_ENV]):
        return open_trace(path)


@contextlib.contextmanager
def cache_home(folder):
    """$XDG_CACHE_HOME set to `folder` inside the block (unchanged when None), then as it was (the
    test's own, from _isolated_cache)."""
    own = os.environ.get("XDG_CACHE_HOME")
    if folder is not None:
        os.environ["XDG_CACHE_HOME"] = str(folder)
    try:
        yield
    finally:
        if own is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = own


def optional_shared() -> Path | None:
    """../shared for a test that also runs without it (doing less): None when absent, a failure
    when LAUNCHTUI_REQUIRE_SHARED=1."""
    if SHARED.is_dir():
        return SHARED
    if REQUIRE_SHARED:
        _absent(SKIP_SHARED)
    return None


# The "every sample" tests (one check on each shared sample) run in the README's lanes on the cover
# below, and on the other samples only in the sweep lane (`-m sweep`, README "Tests"): reading the
# Kineto JSON samples is most of those tests' time, and CI has 4 minutes on 2 cores. Every Nsight
# and ROCm sample is in the cover (they read in a fraction of the time); the Kineto cover holds one
# of each kind the expert readings tell apart: an eager launch-bound trace (b200), inference with
# cold starts (qwen), a HIP trace (mi300 resnet), graph replays (vllm), compiled Triton kernels, a
# rank without a GPU, and a GPU-bound one (timesformer).
KINETO_COVER = frozenset({
    "kineto/b200__eager_trace.json.gz", "kineto/h100_qwen_chat.json.gz", "kineto/mi300_resnet.json.gz",
    "kineto/vllm_graph_execution.json.gz", "kineto/torch_compile_triton__trace.json.gz",
    "kineto/rank_non_gpu__rank_non_gpu.json.gz", "kineto/h100__timesformer-k400.json.gz"})


def in_cover(rel: str) -> bool:
    """Is the sample `rel` (relative to ../shared/samples) checked in the README's lanes?"""
    return not rel.startswith("kineto/") or rel in KINETO_COVER


def cover_part(paths: list, root: Path, part) -> list:
    """The sorted sample `paths` (under `root`, ../shared/samples) that `part` names: "cover", those
    in the cover; (k, n), the k-th of n shards of the others (the sweep lane's)."""
    covered = [in_cover(str(p.relative_to(root))) for p in paths]
    if part == "cover":
        return [p for p, c in zip(paths, covered) if c]
    k, n = part
    return [p for p, c in zip(paths, covered) if not c][k::n]


def cover_or_sweep(rels) -> list:
    """`rels` as parameters, those outside the cover marked `sweep`."""
    return [pytest.param(r, marks=() if in_cover(r) else pytest.mark.sweep) for r in rels]


def snapshot(path: Path):
    """(size, mtime_ns, bytes hash) of a file, to prove a command left it untouched."""
    import hashlib
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest()
