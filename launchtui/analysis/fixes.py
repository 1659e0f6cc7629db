"""The fix rule table (docs/definitions.md §V6, after domain.md §10-§11): the first rule that
matches a small kernel names its planned fix. Data, not free text, so records compare."""
from __future__ import annotations

import re

from launchtui.trace.names import is_nccl

# (rule id, test, fix); tests see the kernel's short name, its distinguishing name and its phase
RULES = (
    ("nccl", "kernel name contains 'nccl'",
     "not a fusion target: communication (analyse with the collectives)"),
    ("zero_grad", "phase contains 'zero_grad'",
     "zero_grad(set_to_none=True): no fill kernel per parameter"),
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
    rule = dict((r[0], r[2]) for r in RULES)
    if is_nccl(names):
        return "nccl", rule["nccl"]
    if phase and "zero_grad" in phase.lower():
        return "zero_grad", rule["zero_grad"]
    if (phase and "optim" in phase.lower()) or "multi_tensor_apply" in names or "foreach" in names.lower():
        return "optimizer", rule["optimizer"]
    if kernel.startswith("triton_"):
        return "compiled", rule["compiled"]
    if _ELEMENTWISE.match(kernel.split("<", 1)[0]):
        return "eager_elementwise", rule["eager_elementwise"]
    return "other", rule["other"]


# What removes each cause of GPU idle (domain.md §10, §12), for the record's ranked fixes (§V6)
CAUSE_FIX = {
    "host": 'CUDA graphs / torch.compile(mode="reduce-overhead"): they remove the host work between launches',
    "launch": "fewer launches: fuse (torch.compile) or use fused kernels",
    "optimizer": "fused optimizer: fused=True (or foreach=True)",
    "zero_grad": RULES[1][2],
    "sync": SYNC_FIX,
    "host_stall": "find the host work between GPU bursts (input loading, Python work, logging) and overlap it "
                  "with GPU work or move it off the step",
    "dependency": "not a launch problem: look at stream dependencies, events and collectives (overlap them)",
    "cold_start": "profile after warm-up: first launches load code (lazy loading, JIT)",
    "migration": "prefetch unified memory (cudaMemPrefetchAsync) or keep the data resident on the device",
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
    rank = {}
    if syncs.get("by_api") and not queue_dry and blocked > hb_ms:
        names = ", ".join(b["api_name"] for b in syncs["by_api"][:3])
        out.append({"rule": "sync", "phase": None, "ms_per_iteration": round(per["sync"], 3),
                    "fix": f"{SYNC_FIX}: the host waits {blocked:,.3f} ms/iteration in {names} while the GPU works, "
                           f"which caps how far it runs ahead ({hb_ms:,.3f} ms/iteration of host bubbles behind it)"})
        rank[id(out[-1])] = per["sync"] + hb_ms     # it also uncovers the bubbles: ranked by both
    for p in idle["by_phase"]:
        rule, fix = phase_fix(p["phase"], p["launch_ms_per_iteration"], p["host_bound_ms_per_iteration"])
        out.append({"rule": rule, "phase": p["phase"], "ms_per_iteration": p["host_bound_ms_per_iteration"], "fix": fix})
    for c in ("host_stall", "sync", "dependency", "cold_start", "migration", "unattributed"):
        if per[c] > 0 and not (c == "sync" and out and out[0]["rule"] == "sync"):
            out.append({"rule": c, "phase": None, "ms_per_iteration": round(per[c], 3), "fix": CAUSE_FIX[c]})
    return sorted(out, key=lambda f: (-rank.get(id(f), f["ms_per_iteration"]), f["rule"], f["phase"] or ""))
