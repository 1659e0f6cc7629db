"""The fix rule table (docs/definitions.md §V6, after domain.md §10-§11): the first rule that
matches a small kernel names its planned fix. Data, not free text, so records compare."""
from __future__ import annotations

import re

from launchtui.trace.names import is_nccl

# (rule id, test, fix); tests see the kernel's short name, its distinguishing name and its phase
RULES = (
    ("nccl", "kernel name contains 'nccl'",
     "not a fusion target: communication (analyse with the collectives)"),
    ("optimizer", "phase contains 'optim', or a multi_tensor_apply / foreach kernel",
     "fused optimizer: fused=True (or foreach=True)"),
    ("compiled", "already-fused Triton kernel (triton_*)",
     'CUDA graphs: torch.compile(mode="reduce-overhead")'),
    ("eager_elementwise", "eager elementwise / reduce kernel (ATen *elementwise_kernel*, reduce_kernel)",
     "torch.compile: fuse the elementwise chain"),
    ("other", "any other small kernel",
     "inspect: fuse with its neighbours, or CUDA graphs if shapes are stable"),
)
SYNC_FIX = "move the sync out of the loop (no .item() / cudaStreamSynchronize / DtoH copy per step)"

# ATen's eager kernels: (vectorized_|unrolled_|index_|distribution_)elementwise_kernel,
# elementwise_kernel_with_index, reduce_kernel (not cuBLAS's splitKreduce_kernel)
_ELEMENTWISE = re.compile(r"^(?:[a-z]+_)?elementwise(?:_[a-z]+)*_kernel(?:_with_index)?$|^reduce_kernel$")


def rule_for(kernel: str, phase: str | None = None, full_name: str = "") -> tuple[str, str]:
    """(rule id, fix) of the first matching rule."""
    names = f"{kernel} {full_name}"
    if is_nccl(names):
        return RULES[0][0], RULES[0][2]
    if (phase and "optim" in phase.lower()) or "multi_tensor_apply" in names or "foreach" in names.lower():
        return RULES[1][0], RULES[1][2]
    if kernel.startswith("triton_"):
        return RULES[2][0], RULES[2][2]
    if _ELEMENTWISE.match(kernel):
        return RULES[3][0], RULES[3][2]
    return RULES[4][0], RULES[4][2]


# What removes each cause of GPU idle (domain.md §10, §12), for the record's ranked fixes (§V6)
CAUSE_FIX = {
    "host": 'CUDA graphs / torch.compile(mode="reduce-overhead"): they remove the host work between launches',
    "launch": "fewer launches: fuse (torch.compile) or use fused kernels",
    "optimizer": "fused optimizer: fused=True (or foreach=True)",
    "zero_grad": "zero_grad(set_to_none=True): no fill kernel per parameter",
    "sync": SYNC_FIX,
    "host_stall": "overlap the host work between GPU bursts (data loading: workers, pinned memory, prefetch)",
    "dependency": "not a launch problem: look at stream dependencies, events and collectives (overlap them)",
    "cold_start": "profile after warm-up: first launches load code (lazy loading, JIT)",
    "unattributed": "record the launches too (start the capture earlier, or do not sample the trace)",
}


def phase_fix(phase: str | None, launch_ms: float, host_bound_ms: float) -> tuple[str, str]:
    """(rule, fix) for one phase's host-bound time: the optimizer and zero_grad have their own
    remedies; else launch calls dominating (>= half) ask for fewer launches, host work for graphs."""
    p = (phase or "").lower()
    if "zero_grad" in p:
        return "zero_grad", CAUSE_FIX["zero_grad"]
    if "optim" in p:
        return "optimizer", CAUSE_FIX["optimizer"]
    if launch_ms >= 0.5 * host_bound_ms:
        return "launch", CAUSE_FIX["launch"]
    return "host", CAUSE_FIX["host"]


def ranked_fixes(idle: dict, syncs: dict, queue_dry: bool, bound: bool) -> list[dict]:
    """Fixes ranked by the GPU idle time per iteration they address (definitions.md §V6): each
    phase's host-bound time; the causes other than host-bound time, each by its own time; a sync
    when the host spends longer blocked in syncs than the GPU waits on it behind a queue that keeps
    work: the sync caps how far the CPU runs ahead, so moving it addresses the sync idle and the
    host bubbles behind it."""
    per = idle["mean_per_iteration_ms"]
    hb_ms = idle["host_bound"]["mean_per_iteration_ms"]
    out = []
    blocked = idle["sync_blocked_while_busy_ms"]["median"]
    if syncs.get("by_api") and not queue_dry and blocked > hb_ms:
        names = ", ".join(b["api_name"] for b in syncs["by_api"][:3])
        out.append({"rule": "sync", "phase": None, "ms_per_iteration": round(per["sync"] + hb_ms, 3),
                    "fix": f"{SYNC_FIX} ({names}: the host waits {blocked:,.3f} ms/iteration while the GPU works)"})
    for p in idle["by_phase"]:
        rule, fix = phase_fix(p["phase"], p["launch_ms_per_iteration"], p["host_bound_ms_per_iteration"])
        out.append({"rule": rule, "phase": p["phase"], "ms_per_iteration": p["host_bound_ms_per_iteration"], "fix": fix})
    for c in ("host_stall", "sync", "dependency", "cold_start", "unattributed"):
        if per[c] > 0 and not (c == "sync" and out and out[0]["rule"] == "sync"):
            out.append({"rule": c, "phase": None, "ms_per_iteration": round(per[c], 3), "fix": CAUSE_FIX[c]})
    return sorted(out, key=lambda f: (-f["ms_per_iteration"], f["rule"], f["phase"] or ""))
