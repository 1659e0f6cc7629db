"""What a benchmark run needs before it measures: the generated data files (made once, cached by
size), the peers' scratch venvs (never project dependencies), the machine's facts, and source
hashes that flag a change during the run."""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from measure import DATA, PY, ROOT, cmd_str, last_json, log, mb, parse_size, rel, run_child

FILE_NAME = {"nsys": "synth_modern.sqlite", "kineto": "synth_modern.json.gz"}
PEERS_DIR = Path(os.environ.get("LAUNCHTUI_BENCH_PEERS", "/tmp"))
NSYSAI_VENV = PEERS_DIR / "peers-nsysai"
HTA_VENV = PEERS_DIR / "peers-hta"
PEER_WORK = PEERS_DIR / "peers-work"
TUI_SCRIPT = ROOT / "scripts" / "tui_latency.py"


def source_hash() -> str:
    """Hash of launchtui's sources (and the TUI script): a change during a run is flagged."""
    h = hashlib.sha256()
    for p in sorted((ROOT / "launchtui").rglob("*.py")) + [TUI_SCRIPT]:
        if p.exists():
            h.update(str(p.relative_to(ROOT)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:12]


def generator_hash() -> str:
    h = hashlib.sha256()
    for p in sorted((ROOT / "fixtures").rglob("*.py")):
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def ensure_data(fmt: str, label: str, regen: bool) -> tuple[Path, dict]:
    n = parse_size(label)
    d = DATA / f"{fmt}_{label}"
    path = d / FILE_NAME[fmt]
    marker = d / "DONE.json"
    ghash = generator_hash()
    if not regen and marker.exists() and path.exists():
        info = json.loads(marker.read_text())
        if info.get("size_bytes") == path.stat().st_size:
            if info.get("generator_hash") != ghash:
                log(f"note: {rel(path)} was made by another version of fixtures/ (--regen to remake)")
            info["cached"] = True
            return path, info
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    argv = [PY, "-m", "fixtures.synth", "--out", rel(d), "--kernels" if fmt == "nsys" else "--events", str(n),
            "--format", fmt, "--no-truth"]
    log(f"generating {fmt} {label}: {cmd_str(argv)}")
    r = run_child(argv, timeout=1800)
    if r["rc"] != 0 or not path.exists():
        raise SystemExit(f"bench: generator failed for {fmt} {label}: {r['stderr_tail']}")
    info = {"command": cmd_str(argv), "generate_s": r["wall_s"], "generate_peak_rss_mb": mb(r["maxrss_kb"]),
            "size_bytes": path.stat().st_size, "generator_hash": ghash, "generator_output": r["stdout"].strip(),
            "made": _dt.datetime.now().isoformat(timespec="seconds")}
    marker.write_text(json.dumps(info, indent=1))
    info["cached"] = False
    return path, info


def ensure_nsysai() -> str | None:
    """Set up nsys-ai 0.3.0 + DuckDB's offline sqlite extension (docs/peers.md). None = ready."""
    exe = NSYSAI_VENV / "bin" / "nsys-ai"
    if not exe.exists():
        log(f"installing nsys-ai into {NSYSAI_VENV} (scratch venv, not a project dependency)")
        r = run_child([sys.executable, "-m", "venv", NSYSAI_VENV], timeout=300)
        if r["rc"] == 0:
            r = run_child([NSYSAI_VENV / "bin" / "pip", "install", "-q", "nsys-ai==0.3.0", "duckdb==1.4.4",
                           "duckdb-ext-sqlite==1.4.4.20260205"], timeout=900)
        if r["rc"] != 0 or not exe.exists():
            return f"could not install nsys-ai: {r['stderr_tail'][-300:]}"
    ext_dir = NSYSAI_VENV / "home" / ".duckdb" / "extensions" / "v1.4.4" / "linux_amd64"
    ext = ext_dir / "sqlite_scanner.duckdb_extension"
    if not ext.exists():
        src = list(NSYSAI_VENV.glob("lib/python3*/site-packages/duckdb_ext/extensions/v1.4.4/linux_amd64/"
                                    "sqlite_scanner.duckdb_extension"))
        if not src:
            return "duckdb-ext-sqlite extension file not found in the nsys-ai venv"
        ext_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src[0], ext)
    return None


def ensure_hta() -> str | None:
    py = HTA_VENV / "bin" / "python"
    ok = py.exists() and run_child([py, "-c", "import hta"], timeout=120)["rc"] == 0
    if not ok:
        log(f"installing HTA into {HTA_VENV} (scratch venv, not a project dependency)")
        r = run_child([sys.executable, "-m", "venv", HTA_VENV], timeout=300)
        if r["rc"] == 0:
            r = run_child([HTA_VENV / "bin" / "pip", "install", "-q", "HolisticTraceAnalysis==0.5.0", "pandas<3"],
                          timeout=900)
        if r["rc"] != 0:
            return f"could not install HTA: {r['stderr_tail'][-300:]}"
    return None


def venv_versions(py: Path, pkgs: list[str]) -> dict:
    if not py.exists():
        return {}
    code = ("import importlib.metadata as m, json, sys; out={}\n"
            f"for p in {pkgs!r}:\n"
            "    try: out[p]=m.version(p)\n"
            "    except Exception: out[p]=None\n"
            "print(json.dumps(out))")
    r = run_child([py, "-c", code], timeout=60)
    return last_json(r["stdout"]) or {}


def machine_info() -> dict:
    info: dict = {"platform": platform.platform(), "python": platform.python_version(),
                  "cpus": os.cpu_count(), "cpus_usable": len(os.sched_getaffinity(0))}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["ram_gib"] = round(int(line.split()[1]) / 1024 ** 2, 1)
    except OSError:
        pass
    import importlib.metadata as md
    for p in ("numpy", "pandas", "msgspec", "textual"):
        try:
            info[p] = md.version(p)
        except md.PackageNotFoundError:
            info[p] = None
    info["sqlite_python_module"] = sqlite3.sqlite_version
    r = run_child(["sqlite3", "--version"], timeout=30) if shutil.which("sqlite3") else None
    info["sqlite_cli"] = r["stdout"].split()[0] if r and r["rc"] == 0 and r["stdout"] else None
    info["peak_rss_method"] = "os.wait4 rusage of each child (ru_maxrss)"
    # what touching fresh memory costs here (VMs whose host backs guest pages lazily pay in sys time)
    probe = ("import numpy as np, time, resource, json\n"
             "r0 = resource.getrusage(resource.RUSAGE_SELF); t = time.perf_counter()\n"
             "a = np.ones(1 << 27, np.int64)\n"
             "t1 = time.perf_counter(); r1 = resource.getrusage(resource.RUSAGE_SELF)\n"
             "print(json.dumps({'s_per_gib': round(t1 - t, 3), 'sys_s_per_gib': round(r1.ru_stime - r0.ru_stime, 3)}))")
    r = run_child([PY, "-c", probe], timeout=120)
    info["first_touch_1gib"] = last_json(r["stdout"])
    info["usr_bin_time"] = Path("/usr/bin/time").exists()
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "launchtui", "scripts"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        info["git"] = head + (" + uncommitted changes in launchtui/ or scripts/" if dirty else "")
    except OSError:
        pass
    return info
