"""The workloads scripts/capture_gpu_traces.py profiles, one per trace of the table: eager training
with AdamW unfused or fused (and with a host sync per step), a launch burst behind a long kernel,
and the training step as a CUDA graph; each returns the raw Kineto trace and its settings.

torch comes in through Ctx (imported by the caller), never at import time, so the rest of the
script works without it. A dry run goes through the same code on the CPU with tiny shapes; the
CUDA-only parts (streams, _sleep, graphs) are skipped there, as each function's branches show.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from capture_table import Shapes


def make_model(torch, s: Shapes, device: str):
    nn = torch.nn
    F = torch.nn.functional
    hd = s.hidden // s.heads

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(s.hidden)
            self.q = nn.Linear(s.hidden, s.hidden)
            self.k = nn.Linear(s.hidden, s.hidden)
            self.v = nn.Linear(s.hidden, s.hidden)
            self.o = nn.Linear(s.hidden, s.hidden)
            self.ln2 = nn.LayerNorm(s.hidden)
            self.up = nn.Linear(s.hidden, s.ffn)
            self.down = nn.Linear(s.ffn, s.hidden)

        def forward(self, x):
            b, t, _ = x.shape
            h = self.ln1(x)
            q, k, v = (lin(h).view(b, t, s.heads, hd).transpose(1, 2) for lin in (self.q, self.k, self.v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o(a.transpose(1, 2).reshape(b, t, s.hidden))
            return x + self.down(F.gelu(self.up(self.ln2(x))))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(s.layers))
            self.ln_f = nn.LayerNorm(s.hidden)

        def forward(self, x):
            for blk in self.blocks:
                x = blk(x)
            return self.ln_f(x)

    return Model().to(device=device, dtype=getattr(torch, s.dtype))


@dataclass
class Ctx:
    torch: object
    device: str
    shapes: Shapes
    steps: int
    out: Path
    tmp: Path
    dry_run: bool
    size_limit: int
    bp_sleep_ms: float
    bp_kernels: int

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def profiler(self, warmup: int, active: int, sink: dict):
        """A torch profiler over `warmup` discarded + `active` recorded steps; the trace lands in sink['raw']."""
        from torch.profiler import ProfilerActivity, profile, schedule
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        path = self.tmp / f"trace-{len(os.listdir(self.tmp))}.json"

        def ready(prof):
            prof.export_chrome_trace(str(path))
            sink["raw"] = path.read_bytes()
            path.unlink()

        return profile(activities=acts, schedule=schedule(wait=0, warmup=warmup, active=active, repeat=1),
                       on_trace_ready=ready, record_shapes=False, with_stack=False, profile_memory=False,
                       with_flops=False, with_modules=False)


def _data(ctx: Ctx, model_dtype):
    torch = ctx.torch
    g = torch.Generator(device="cpu").manual_seed(0)
    s = ctx.shapes
    x = torch.randn(s.batch, s.seq, s.hidden, generator=g).to(ctx.device, model_dtype)
    y = torch.randn(s.batch, s.seq, s.hidden, generator=g).to(ctx.device, model_dtype)
    return x, y


def _adamw(ctx: Ctx, params, **kw):
    return ctx.torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, **kw)


def capture_eager(ctx: Ctx, name: str) -> tuple[bytes, dict]:
    """eager_adamw_unfused / eager_adamw_fused / sync_in_loop."""
    torch = ctx.torch
    from torch.profiler import record_function
    F = torch.nn.functional
    torch.manual_seed(0)
    model = make_model(torch, ctx.shapes, ctx.device)
    fused = name == "eager_adamw_fused"
    opt_kw = {"fused": True} if fused else {"foreach": False}
    opt = _adamw(ctx, model.parameters(), **opt_kw)
    x, y = _data(ctx, next(model.parameters()).dtype)
    sync_each_step = name == "sync_in_loop"
    losses = []

    def step():
        with record_function("forward"):
            loss = F.mse_loss(model(x), y)
        with record_function("backward"):
            loss.backward()
        with record_function("Optimizer.step"):
            opt.step()
        opt.zero_grad(set_to_none=True)
        if sync_each_step:
            with record_function("loss.item()"):
                losses.append(loss.item())      # the host sync under test: drains the queue every step

    for _ in range(2):                          # unprofiled warm-up: lazy module loading, optimizer state
        step()
    ctx.sync()
    sink: dict = {}
    with ctx.profiler(1, ctx.steps, sink) as prof:
        for i in range(ctx.steps + 1):
            step()
            if i == ctx.steps:
                ctx.sync()                      # every kernel of the last step inside the window
            prof.step()
    settings = {"optimizer": "torch.optim.AdamW", "optimizer_kwargs": opt_kw, "loss_item_every_step": sync_each_step,
                "params": sum(p.numel() for p in model.parameters()),
                "param_tensors": sum(1 for _ in model.parameters()),
                "warmup_steps": 2, "profiler_schedule": {"wait": 0, "warmup": 1, "active": ctx.steps}}
    return sink["raw"], settings


def _sleep_cycles_per_ms(torch) -> float:
    """Calibrate torch.cuda._sleep (it spins for clock cycles) against CUDA events."""
    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    best = None
    for _ in range(3):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch.cuda._sleep(10_000_000)
        b.record()
        b.synchronize()
        ms = a.elapsed_time(b)
        best = ms if best is None else min(best, ms)
    return 10_000_000 / max(best, 1e-3)


def capture_backpressure(ctx: Ctx, sleep_ms: float, n_kernels: int) -> tuple[bytes, dict]:
    torch = ctx.torch
    from torch.profiler import record_function
    stream = torch.cuda.Stream() if ctx.cuda else None
    x = torch.zeros(1, device=ctx.device)
    one = torch.ones(1, device=ctx.device)          # a tensor operand: a Python scalar adds aten::to per call
    cycles = int(sleep_ms * _sleep_cycles_per_ms(torch)) if ctx.cuda else 0

    def burst(n, sleep_cycles):
        if ctx.cuda:
            with torch.cuda.stream(stream):
                torch.cuda._sleep(sleep_cycles)     # the long kernel at the head of the queue
                for _ in range(n):
                    x.add_(one)                     # tiny kernels, launched as fast as Python goes
        else:                                       # dry run: the same launch loop, no GPU queue behind it
            for _ in range(n):
                x.add_(one)

    burst(64, 1000 if ctx.cuda else 0)              # warm-up: the add kernel's module is loaded
    ctx.sync()
    sink: dict = {}
    with ctx.profiler(1, 1, sink) as prof:
        burst(8, 1000 if ctx.cuda else 0)           # profiler warm-up step (discarded)
        ctx.sync()
        prof.step()
        with record_function("backpressure_burst"):
            burst(n_kernels, cycles)
        ctx.sync()
        prof.step()
    settings = {"sleep_ms_target": sleep_ms, "sleep_cycles": cycles, "tiny_kernels": n_kernels,
                "tiny_kernel": "x.add_(one) on 1-element float32 tensors",
                "stream": "one dedicated torch.cuda.Stream" if ctx.cuda else None}
    return sink["raw"], settings


def capture_graphs(ctx: Ctx) -> tuple[bytes, dict]:
    torch = ctx.torch
    from torch.profiler import record_function
    F = torch.nn.functional
    torch.manual_seed(0)
    model = make_model(torch, ctx.shapes, ctx.device)
    # capturable=True keeps the optimizer's step counters on the GPU, as graph capture requires.
    opt_kw = {"foreach": False, "capturable": True} if ctx.cuda else {"foreach": False}
    opt = _adamw(ctx, model.parameters(), **opt_kw)
    static_x, static_y = _data(ctx, next(model.parameters()).dtype)

    def body():
        loss = F.mse_loss(model(static_x), static_y)
        loss.backward()
        opt.step()
        return loss

    if ctx.cuda:  # warm up on a side stream (PyTorch's whole-network capture recipe)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                body()
        torch.cuda.current_stream().wait_stream(s)
    else:
        for _ in range(2):
            opt.zero_grad(set_to_none=True)
            body()
    sink: dict = {}
    graph = None
    with ctx.profiler(1, ctx.steps, sink) as prof:
        # Profiler warm-up step (discarded): capture while CUPTI is already active, then one replay, so
        # instantiation and the first upload are outside the recorded steps.
        opt.zero_grad(set_to_none=True)
        if ctx.cuda:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                body()
            replay = graph.replay
        else:                                   # dry run: no graphs on the CPU; the eager step stands in
            def replay():
                opt.zero_grad(set_to_none=True)
                body()
        replay()
        ctx.sync()
        prof.step()
        for i in range(ctx.steps):
            with record_function("graph_replay"):
                replay()
            if i == ctx.steps - 1:
                ctx.sync()
            prof.step()
    settings = {"optimizer": "torch.optim.AdamW", "optimizer_kwargs": opt_kw, "replays": ctx.steps,
                "graph": "torch.cuda.CUDAGraph of forward + backward + optimizer step" if ctx.cuda else
                         "dry run: eager stand-in (no CUDA graphs on the CPU)"}
    return sink["raw"], settings


def time_launch_burst(ctx: "Ctx", cycles: int, n: int) -> list[int]:
    """Wall time of each of `n` tiny launches behind a `cycles`-long sleep kernel, unprofiled."""
    torch = ctx.torch
    stream = torch.cuda.Stream()
    x = torch.zeros(1, device=ctx.device)
    one = torch.ones(1, device=ctx.device)
    out = []
    clock = time.perf_counter_ns
    with torch.cuda.stream(stream):
        torch.cuda._sleep(cycles)
        for _ in range(n):
            t = clock()
            x.add_(one)
            out.append(clock() - t)
    ctx.sync()
    return out
