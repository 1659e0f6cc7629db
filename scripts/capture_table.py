"""What scripts/capture_gpu_traces.py captures: the manifest's constants, the model shapes, and the
trace table (each trace's name, purpose and what it must show), with the thresholds the post-capture
checks and tests/test_gpu_fixtures.py hold each trace to (tests/test_capture_script.py checks that
the fixture tests' copies of the thresholds agree with these).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass


MANIFEST_NAME = "MANIFEST.json"
MANIFEST_SCHEMA = 1
SIZE_LIMIT_BYTES = 2 * 1024 * 1024          # per gzipped trace
DEFAULT_STEPS = 5
REGENERATE = "python scripts/capture_gpu_traces.py --out fixtures/gpu"


# What the tests (tests/test_gpu_fixtures.py) and the post-capture checks expect.
MIN_OPTIMIZER_RATIO = 10          # unfused optimizer-range launches >= 10 x fused
MIN_UNFUSED_OPTIMIZER_LAUNCHES = 1000
MIN_SATURATED_DEPTH = 1000        # backpressure: the pending depth must reach at least this
MIN_OPS_PER_GRAPH_LAUNCH = 100    # cuda_graphs: "many kernels share one cudaGraphLaunch"


@dataclass(frozen=True)
class Shapes:
    layers: int
    hidden: int
    heads: int
    ffn: int
    batch: int
    seq: int
    dtype: str

    def to_json(self) -> dict:
        return asdict(self)


# The GPU shapes: small enough that 5 profiled steps stay well under the size limit, big enough to be a
# realistic (launch-bound) transformer block. 4 layers x 16 parameter tensors + the final norm = 66 tensors.
GPU_SHAPES = Shapes(layers=4, hidden=1024, heads=16, ffn=4096, batch=8, seq=256, dtype="bfloat16")
# The dry run keeps the structure (same layers, so the same parameter tensors and the same op counts per
# step) with tiny dimensions, so a CPU finishes it in seconds.
DRY_RUN_SHAPES = Shapes(layers=4, hidden=64, heads=4, ffn=256, batch=2, seq=16, dtype="bfloat16")


@dataclass(frozen=True)
class TraceSpec:
    name: str
    purpose: str
    shows: tuple[str, ...]          # what the trace is meant to show, as checked by the tests

    @property
    def filename(self) -> str:
        return trace_filename(self.name)


SPECS: tuple[TraceSpec, ...] = (
    TraceSpec(
        "eager_adamw_unfused",
        "Eager training of a small transformer (bf16) with torch.optim.AdamW(foreach=False): the 'before' "
        "half of the fused-optimizer before/after pair.",
        ("record_function ranges forward, backward, Optimizer.step (plus PyTorch's Optimizer.step#AdamW.step)",
         "thousands of tiny per-parameter optimizer kernels in the Optimizer.step range",
         f"optimizer-range launches >= {MIN_OPTIMIZER_RATIO}x those of eager_adamw_fused")),
    TraceSpec(
        "eager_adamw_fused",
        "The same training with torch.optim.AdamW(fused=True): the 'after' half of the pair (the fix the "
        "domain brief recommends).",
        ("the same ranges as eager_adamw_unfused",
         "a handful of multi-tensor optimizer kernels per step instead of thousands")),
    TraceSpec(
        "backpressure",
        "One stream: a long GPU kernel (torch.cuda._sleep, ~50 ms) followed by ~3000 tiny kernels launched "
        "as fast as possible, so the stream's pending queue hits its hardware limit and launch calls block.",
        ("the pending-launch depth reaches the stream's limit on this GPU (recorded in the manifest)",
         "launch spikes: launch calls that block for a slot (>100 us and >10x the median)")),
    TraceSpec(
        "cuda_graphs",
        "The model's whole training step captured with torch.cuda.CUDAGraph (AdamW capturable) and replayed "
        "once per profiled step.",
        ("one cudaGraphLaunch per replay",
         "every kernel of a replay shares its cudaGraphLaunch's correlation id (joined to it)",
         f"many (>= {MIN_OPS_PER_GRAPH_LAUNCH}) GPU ops per graph launch")),
    TraceSpec(
        "sync_in_loop",
        "eager_adamw_unfused with loss.item() inside every step: a host sync per step.",
        ("a cudaStreamSynchronize (via .item()) in every ProfilerStep",
         "the pending queue drains to 0 in every step: the GPU waits for the CPU")),
)
SPEC_BY_NAME = {s.name: s for s in SPECS}
TRACE_NAMES = tuple(s.name for s in SPECS)


def trace_filename(name: str) -> str:
    return f"{name}.json.gz"
