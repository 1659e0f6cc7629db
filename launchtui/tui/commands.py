"""Command palette (Ctrl+P): NVTX jumps, export, table sorting, NCCL toggle, trace info."""
from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider


class LaunchCommands(Provider):
    def _commands(self):
        app = self.app
        scr = getattr(app, "main", None)
        if scr is None:
            return []
        from launchtui.tui.widgets.kernel_table import COLUMNS
        cmds = [
            ("Export range to JSON", scr.action_export, "the selected range, or the visible window"),
            ("Show trace info", scr.action_info, "what the trace holds and what is missing"),
            ("Toggle NCCL rows in the table", scr.action_toggle_nccl, "hide or show NCCL kernels"),
            ("Jump to the optimizer phase", scr.action_optimizer, "first range whose name contains 'optim'"),
            ("Pick an NVTX range", scr.action_nvtx_picker, "fuzzy list of range names"),
            ("Fit the GPU activity and its launches", scr.action_fit, ""),
            ("Toggle absolute / relative time", scr.action_toggle_time, ""),
            ("Toggle kernel names short / distinguishing", scr.action_toggle_names, ""),
            ("Cycle device", scr.action_cycle_device, ""),
            ("Call-site pane: kernels / both / call sites", scr.action_source_pane,
             "the lines of code that launch the kernels (w)"),
            ("Pick a call site", scr.action_call_sites, "fuzzy list of call sites; Enter highlights its launches"),
            ("Show keys (help)", app.action_help, ""),
        ]
        for c in COLUMNS:
            cmds.append((f"Sort table by {c.title}", partial(scr.sort_table, c.key), ""))
        cmds.append(("Sort table by rank (total API time)", partial(scr.sort_table, None), "the engine's order"))
        for e in scr.nvtx_names()[:500]:
            cmds.append((f"Jump to NVTX range: {e.name}", partial(scr.jump_to_range_name, e),
                         f"{e.count:,}× · first occurrence"))
        return cmds

    async def discover(self) -> Hits:
        for name, cb, help_ in self._commands()[:14]:
            yield DiscoveryHit(name, cb, help=help_ or None)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, cb, help_ in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), cb, help=help_ or None)
