"""`e` on the main view: export the selected range, or the visible window, as `launchtui export` would
(launchtui's range document, or with Ctrl+T in the dialog a Chrome trace: `--format chrome`).

The dialog shows the equivalent command line; the file is written atomically in a worker and never
replaced without asking. The Selection comes from the same functions the CLI uses for `--trim` and
`--device`, so the TUI's file is byte-identical to the command's.
"""
from __future__ import annotations

from pathlib import Path


class ExportFlow:
    """The export steps of one MainScreen: dialog, overwrite question, worker, notification."""

    def __init__(self, screen) -> None:
        self.screen = screen
        self.paths: list[str] = []          # files written, for tests and the session's record

    @property
    def app(self):
        return self.screen.app

    def window(self) -> tuple[int, int]:
        tl = self.screen.timeline
        if tl.sel_range is not None:
            return tl.sel_range
        return int(tl.view.start), int(tl.view.end)

    def selection(self):
        """(selection, a_s, b_s): the same Selection `launchtui export --trim a_s b_s` builds."""
        from launchtui.analysis.select import SelectionSpec, build_selection
        t0, t1 = self.window()
        a_s, b_s = t0 / 1e9, t1 / 1e9
        spec = SelectionSpec(device=self.screen.device, trim_s=(a_s, b_s))
        return build_selection(self.screen.loaded.trace, spec), a_s, b_s

    def options(self):
        """(ReportOptions, RecordOptions) of what the screen shows: the table's thresholds (all its
        rows: no limit), its name mode, the verdict's phase level."""
        from launchtui.analysis.record_options import RecordOptions
        from launchtui.analysis.report import ReportOptions
        st, names = self.screen.verdict.settings, self.screen.name_mode
        return (ReportOptions(min_launches=st.min_launches, max_avg_us=st.max_avg_us, limit=0, names=names),
                RecordOptions(min_launches=st.min_launches, max_avg_us=st.max_avg_us, phase_level=st.phase_level,
                              names=names))

    def command(self, a_s: float, b_s: float, out: str, fmt: str = "launchtui") -> str:
        scr = self.screen
        dev = f" --device {scr.device}" if scr.device is not None else ""
        form = " --format chrome" if fmt == "chrome" else ""
        shown = ""
        if fmt == "launchtui":   # the screen's table and verdict settings, so the file is the same
            st = scr.verdict.settings
            shown = (f" --min-launches {st.min_launches} --max-avg-us {st.max_avg_us:g} --limit 0"
                     f" --names {scr.name_mode} --phase-level {st.phase_level}")
        return f"launchtui export {scr.loaded.trace.source.path}{form} --trim {a_s!r} {b_s!r}{dev}{shown} -o {out}"

    def start(self) -> None:
        from launchtui.analysis.export import default_export_name
        from launchtui.errors import TraceError
        from launchtui.tui.format import fmt_duration
        from launchtui.tui.screens import ExportDialog
        which = "selected range" if self.screen.timeline.sel_range is not None else "visible window"
        try:
            sel, a_s, b_s = self.selection()
        except TraceError:
            self.app.notify(self._why_nothing(which), title="Nothing to export", severity="warning", timeout=10)
            return
        from launchtui.analysis.chrome_export import default_chrome_name
        name = default_export_name(self.screen.loaded.trace, sel)
        chrome = default_chrome_name(self.screen.loaded.trace, sel)
        text = f"{which}: {a_s:.6f} s – {b_s:.6f} s ({fmt_duration((b_s - a_s) * 1e9)})"

        def done(answer) -> None:
            if answer:
                self.write(answer[0], sel, force=False, fmt=answer[1])
        self.app.push_screen(ExportDialog(name, text, self.command(a_s, b_s, name), chrome,
                                          self.command(a_s, b_s, chrome, "chrome")), done)

    def _why_nothing(self, which: str) -> str:
        """The reason, in the TUI's words, an export of this window would select nothing."""
        tr = self.screen.loaded.trace
        if tr.window() is None:
            return "This trace has no GPU ops, so there is no window to export."
        return (f"The {which} holds no complete GPU op on the shown device(s): an export, like "
                "`launchtui export --trim`, keeps the ops that lie wholly inside the window. Zoom out (-) "
                "or mark a range around whole kernels (v … v), then press e again.")

    def write(self, path: str, sel, force: bool, fmt: str = "launchtui") -> None:
        if Path(path).exists() and not force:
            from launchtui.tui.screens import ConfirmScreen

            def answer(yes) -> None:
                if yes:
                    self.write(path, sel, force=True, fmt=fmt)
                else:
                    self.app.notify("Export cancelled; nothing written.")
            self.app.push_screen(ConfirmScreen(f"{path} exists. Overwrite it?"), answer)
            return
        self.app.notify(f"Exporting to {path}…", timeout=3)
        opts = self.options()
        self.screen.run_worker(lambda: self._write(path, sel, force, opts, fmt), thread=True, group="export")

    def _write(self, path: str, sel, force: bool, opts: tuple, fmt: str = "launchtui") -> None:
        from launchtui.analysis.export import export_text
        from launchtui.errors import TraceError
        from launchtui.output import write_atomic_chunks
        app = self.app
        try:
            if fmt == "chrome":   # as `launchtui export --format chrome --trim a b`: default record options
                from launchtui.analysis.chrome_export import chrome_chunks
                out = write_atomic_chunks(path, chrome_chunks(self.screen.loaded.trace, sel), force=force,
                                          compress=path.endswith(".gz"))
            else:
                text = export_text(self.screen.loaded.trace, sel, *opts)
                out = write_atomic_chunks(path, (t.encode("utf-8") for t in text), force=force)
        except TraceError as e:
            app.call_from_thread(app.notify, str(e), title="Export failed", severity="error", timeout=10)
            return
        except OSError as e:
            app.call_from_thread(app.notify, f"{path}: {e}", title="Export failed", severity="error", timeout=10)
            return
        self.paths.append(str(out))
        app.call_from_thread(app.notify, f"wrote {Path(out).resolve()}", title="Exported", timeout=10)
