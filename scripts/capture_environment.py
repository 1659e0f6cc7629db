"""The capture machine as scripts/capture_gpu_traces.py records it: torch (imported only when a
capture starts), the GPU, its driver and the versions Kineto writes into a trace.

Only queries: nothing here changes a GPU setting.
"""
from __future__ import annotations

import platform
import re
import shutil
import subprocess


class Unavailable(Exception):
    """No torch or no CUDA device: one line, exit status 2."""


def import_torch():
    try:
        import torch
    except ImportError as e:
        raise Unavailable(f"torch is not importable ({e}); install PyTorch to capture traces") from None
    return torch


def _nvidia_smi_driver() -> str | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:  # a query only: never a setting
        r = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    line = r.stdout.strip().splitlines()[0].strip() if r.returncode == 0 and r.stdout.strip() else ""
    return line or None


def _nvml_driver() -> str | None:
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            v = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # optional source only
        return None


def environment(torch, device: str) -> dict:
    import numpy
    env = {
        "device": device,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "cudnn_version": None,
        "python_version": platform.python_version(),
        "numpy_version": numpy.__version__,
        "gpu_name": None, "gpu_count": 0, "compute_capability": None, "sm_count": None,
        "total_memory_bytes": None, "driver_version": None,
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(gpu_name=props.name, gpu_count=torch.cuda.device_count(),
                   compute_capability=f"{props.major}.{props.minor}", sm_count=props.multi_processor_count,
                   total_memory_bytes=int(props.total_memory),
                   driver_version=_nvidia_smi_driver() or _nvml_driver())
        try:
            env["cudnn_version"] = torch.backends.cudnn.version()
        except Exception:
            pass
    return env


def kineto_metadata(raw: bytes) -> dict:
    """Version keys Kineto writes into the trace header (absent on CPU-only traces)."""
    head = raw[:8192].decode("utf-8", "replace")
    out = {}
    for key in ("cupti_version", "cuda_runtime_version", "cuda_driver_version", "schemaVersion"):
        mm = re.search(r'"%s"\s*:\s*"?([^",\s}]+)' % key, head)
        if mm:
            out[key] = mm.group(1)
    return out
