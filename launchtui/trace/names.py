"""Name handling: kernel short names, distinguishing names, API names and kinds.

These run once per *distinct* name (hundreds to a few thousand), never per event.
"""
from __future__ import annotations

import re

from launchtui.trace.model import (API_GRAPH_LAUNCH, API_LAUNCH, API_MEMCPY, API_MEMSET, API_OTHER,
                                   API_SYNC)

_ANON = "(anonymous namespace)"
_ANON_TOKEN = "anonymous_namespace"


def _strip_trailing_args(s: str) -> str:
    """Drop a trailing top-level `( ... )` argument list (and a trailing `const`)."""
    s = s.rstrip()
    if s.endswith(" const"):
        s = s[:-6].rstrip()
    if not s.endswith(")"):
        return s
    depth = 0
    for i in range(len(s) - 1, -1, -1):
        c = s[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                return s[:i]
    return s


def _remove_templates(s: str) -> str:
    """Remove `<...>` groups, counting brackets only outside parentheses."""
    out = []
    angle = 0
    paren = 0
    for c in s:
        if c == "(" and angle:
            paren += 1
        elif c == ")" and angle and paren:
            paren -= 1
        elif paren == 0 and c == "<":
            angle += 1
            continue
        elif paren == 0 and c == ">" and angle:
            angle -= 1
            continue
        if angle == 0:
            out.append(c)
    return "".join(out)


def _last_top_level(s: str, sep: str) -> int:
    """Index of the last `sep` outside parentheses, or -1."""
    depth = 0
    pos = -1
    i = 0
    n = len(sep)
    while i < len(s):
        c = s[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif depth == 0 and s.startswith(sep, i):
            pos = i
            i += n
            continue
        i += 1
    return pos


def kernel_short_name(name: str) -> str:
    """Nsight's `shortName` from a demangled kernel name (definitions.md §10)."""
    s = name.strip().replace(_ANON, _ANON_TOKEN)
    if "(" not in s and "<" not in s and " " not in s:
        return s
    s = _strip_trailing_args(s)
    s = _remove_templates(s)
    sp = _last_top_level(s, " ")
    if sp >= 0:
        s = s[sp + 1:]
    cc = _last_top_level(s, "::")
    if cc >= 0:
        s = s[cc + 2:]
    s = s.strip()
    return s.replace(_ANON_TOKEN, _ANON) if s else name


# Wrappers that say nothing about the operation: skipped when looking for the telling functor.
_GENERIC_FUNCTORS = {"BinaryFunctor", "UnaryFunctor", "AUnaryFunctor", "BUnaryFunctor",
                     "CUDAFunctorOnSelf", "CUDAFunctorOnOther", "OpaqueFunctor"}
_FUNCTOR_RE = re.compile(r"([A-Za-z_]\w*(?:Functor|functor)\w*)")
_LAMBDA_FN_RE = re.compile(r"([A-Za-z_]\w*)(?:<[^()]*>)?\([^()]*\)(?: const)?::\{lambda")
_IDENT_RE = re.compile(r"[A-Za-z_]\w*(?!\w|::)")
_BORING = {"void", "int", "long", "float", "double", "char", "bool", "unsigned", "short", "const", "signed",
           "at", "native", "detail", "std", "c10", "Half", "BFloat16", "Array", "true", "false",
           "anonymous", "namespace", "anonymous_namespace", "lambda", "operator", "TensorIteratorBase",
           "cutlass", "cuda", "gpu_kernel_impl", "gpu_kernel_impl_nocast", "OffsetCalculator",
           "memory", "policies", "LoadWithoutCast", "StoreWithoutCast", "LoadWithCast", "StoreWithCast",
           "TrivialOffsetCalculator", "IntDivider", "uint32_t", "int64_t", "size_t", "type", "enable_if"}


def _template_args(name: str) -> str:
    """The text inside the kernel's own top-level template brackets, '' when none."""
    s = _strip_trailing_args(name.strip())
    depth = 0
    paren = 0
    start = -1
    last = None
    for i, c in enumerate(s):
        if c == "(":
            paren += 1
        elif c == ")":
            paren = max(0, paren - 1)
        elif paren == 0 and c == "<":
            if depth == 0:
                start = i + 1
            depth += 1
        elif paren == 0 and c == ">" and depth:
            depth -= 1
            if depth == 0:
                last = (start, i)
    return s[last[0]:last[1]] if last else ""


def distinguishing_name(short: str, full: str) -> str:
    """Short name plus the functor or template argument that tells variants apart.

    `elementwise_kernel` + `...AddcmulFunctor<float>...` -> `elementwise_kernel<AddcmulFunctor>`.
    """
    if not full or full == short:
        return short
    args = _template_args(full)
    if not args:
        return short
    functors = [f for f in _FUNCTOR_RE.findall(args) if f not in _GENERIC_FUNCTORS]
    if functors:
        return f"{short}<{functors[-1]}>"
    for fn in _LAMBDA_FN_RE.findall(args):
        if fn not in _BORING:
            return f"{short}<{fn}>"
    for ident in _IDENT_RE.findall(args):
        if ident not in _BORING and not ident.isdigit() and ident != short:
            return f"{short}<{ident}>"
    return short


_VERSION_SUFFIX = re.compile(r"_v\d{4,5}$")


def api_display_name(raw: str) -> str:
    """Strip the runtime entry-point version (`_v7000`, `_v11060`), never a driver `_v2`."""
    return _VERSION_SUFFIX.sub("", raw)


_SYNC_NAMES = ("Synchronize", "StreamWaitEvent", "EventQuery", "StreamQuery")


def api_kind(name: str) -> int:
    """Classify an API call by its (display) name."""
    n = api_display_name(name)
    if n.startswith(("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")):
        return API_GRAPH_LAUNCH
    if n.startswith(("cudaLaunch", "cuLaunch", "hipLaunch", "hipExtLaunch", "hipModuleLaunch",
                     "hipExtModuleLaunch", "hipHccModuleLaunch")):
        return API_LAUNCH
    if any(k in n for k in _SYNC_NAMES) or n in ("Stream Sync", "Event Sync", "Context Sync",
                                                 "Stream Wait Event"):
        return API_SYNC
    if n.startswith(("cudaMemcpy", "cuMemcpy", "hipMemcpy")):
        return API_MEMCPY
    if n.startswith(("cudaMemset", "cuMemset", "hipMemset")):
        return API_MEMSET
    return API_OTHER


def is_nccl(name: str) -> bool:
    return "nccl" in name.lower()
