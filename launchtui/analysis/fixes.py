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
