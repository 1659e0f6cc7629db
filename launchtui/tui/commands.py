"""Command palette (Ctrl+P): NVTX jumps, export, table sorting, NCCL toggle, trace info."""
from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider


class LaunchCommands(Provider):
    def _commands(self):
        app = self.app
        if getattr(app, "loaded", None) is None:
            return []
        from launchtui.tui.widgets.kernel_table import COLUMNS
        cmds = [
            ("Export range to JSON", app.action_export, "the selected range, or the visible window"),
            ("Show trace info", app.action_info, "what the trace holds and what is missing"),
            ("Toggle NCCL rows in the table", app.action_toggle_nccl, "hide or show NCCL kernels"),
            ("Jump to the optimizer phase", app.action_optimizer, "first range whose name contains 'optim'"),
            ("Pick an NVTX range", app.action_nvtx_picker, "fuzzy list of range names"),
            ("Fit the whole trace", app.action_fit, ""),
            ("Toggle absolute / relative time", app.action_toggle_time, ""),
            ("Toggle kernel names short / distinguishing", app.action_toggle_names, ""),
            ("Cycle device", app.action_cycle_device, ""),
            ("Show keys (help)", app.action_help, ""),
        ]
        for c in COLUMNS:
            cmds.append((f"Sort table by {c.title}", partial(app.sort_table, c.key), ""))
        cmds.append(("Sort table by rank (total API time)", partial(app.sort_table, None), "the engine's order"))
        for e in app.nvtx_names()[:500]:
            cmds.append((f"Jump to NVTX range: {e.name}", partial(app.jump_to_range_name, e),
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
