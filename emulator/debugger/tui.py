"""The full-screen debugger: rich's ``Live`` on the alternate screen, keys read from
the terminal in raw mode, the same command engine as the scripted mode.

Rich draws the whole screen at once from a ``Layout`` (no clearing between frames,
so nothing flickers) at the terminal's current size, read again on every frame and
on SIGWINCH (so it resizes). Keys: F5 continue, F6 pka-next, F7 reverse-stepi, F8
reverse-continue, F9 finish, F10 next, F11 step, F12 stepi; Enter on an empty line
repeats the last command; Up/Down walk the command history; Ctrl-C interrupts a
run (between its slices) or clears the line; Ctrl-L redraws; Ctrl-D or ``quit``
leaves. The terminal's mode is restored however the loop ends.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import termios
import tty
from collections import deque
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.layout import Layout
from rich.live import Live
from rich.panel import Panel
from rich.text import Text

from pkasim.debugger import views
from pkasim.debugger.engine import Debugger

KEYS = {
    "\x1b[15~": "continue", "\x1b[17~": "pka-next", "\x1b[18~": "reverse-stepi", "\x1b[19~": "reverse-continue",
    "\x1b[20~": "finish", "\x1b[21~": "next", "\x1b[23~": "step", "\x1b[24~": "stepi",
}
KEY_HELP = "F5 cont F6 pka F7 rsi F8 rc F9 fin F10 next F11 step F12 si  Enter=repeat  quit"
OUTPUT_LINES = 500


class _Output:
    """The firmware's console output, kept for the output pane."""

    def __init__(self, sink: deque) -> None:
        self.sink = sink
        self.pending = ""

    def write(self, data: bytes) -> int:
        self.pending += data.decode("utf-8", errors="replace")
        *lines, self.pending = self.pending.split("\n")
        self.sink.extend(f"> {line}" for line in lines)
        return len(data)

    def flush(self) -> None:
        pass


def _crop_middle(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    keep = max(width - 1, 2)
    return text[:keep // 2] + "…" + text[len(text) - (keep - keep // 2):]


class Screen:
    """Renders the panes for the current terminal size."""

    def __init__(self, debugger: Debugger, log: deque) -> None:
        self.d = debugger
        self.log = log
        self.input = ""

    def _source(self, height: int, width: int) -> Panel:
        m, info = self.d.machine, self.d.info
        pc = m.pc
        context = max(1, (height - 3) // 2)
        lines = views.source(info, pc, context)
        title = "source"
        if lines is None:
            lines = views.disassembly(m, pc, before=context, after=height - 2 - context)
            title = "disassembly"
        else:
            line = info.line_at(pc)
            title = f"{line.file.rsplit('/', 1)[-1]}:{line.line}  {m.describe(pc)}"
        body = Text()
        for i, ln in enumerate(lines[:max(1, height - 2)]):
            style = "reverse" if ln.startswith("=>") else ""
            body.append(ln[:max(1, width - 4)].expandtabs(4), style=style)
            if i < len(lines) - 1:
                body.append("\n")
        return Panel(body, title=title, title_align="left", padding=(0, 0))

    def _registers(self) -> Panel:
        rows = views.registers(self.d.machine, self.d.previous_regs)
        body = Text()
        for i in range(0, 16, 2):
            for n, v, changed in rows[i:i + 2]:
                body.append(f"{n:>3} ", style="dim")
                body.append(f"{v:08x}", style="bold yellow" if changed else "")
                body.append(" ")
            body.append("\n")
        regs = {n: v for n, v, _ in rows}
        body.append(f"xpsr {views.xpsr_flags(regs['xpsr'])}")
        return Panel(body, title="registers", title_align="left", padding=(0, 0))

    def _stack(self, height: int, width: int) -> Panel:
        """The call stack, then the stack from SP, or the memory the last ``x`` showed."""
        m = self.d.machine
        frames = views.backtrace(m, self.d.info)
        room = max(1, height - 2)
        shown = frames[:max(1, room // 2)]
        rest = max(0, room - len(shown))
        title = "call stack / stack"
        if self.d.memory_view is not None and rest:
            addr, unit, style = self.d.memory_view
            per_line = {1: 8, 2: 8, 4: 4, 8: 2}[unit]
            try:
                mem = views.memory(m, addr, rest * per_line, unit, style)
                title = f"call stack / memory at 0x{addr:08x}"
            except Exception:  # noqa: BLE001 - an address that stopped being readable
                mem = views.stack(m, rest)
        else:
            mem = views.stack(m, rest)
        lines = shown + mem
        body = "\n".join(ln[:max(1, width - 4)] for ln in lines[:room])
        return Panel(Text(body), title=title, title_align="left", padding=(0, 0))

    def _pka(self, height: int, width: int) -> Panel:
        lines = views.pka(self.d.machine)
        room = max(1, height - 2)
        body = "\n".join(_crop_middle(ln, max(8, width - 4)) for ln in lines[:room])
        return Panel(Text(body), title="PKA", title_align="left", padding=(0, 0))

    def _status(self) -> Text:
        m = self.d.machine
        return Text(views.time_line(m, self.d.since_cycles), style="bold", no_wrap=True, overflow="crop")

    def _devices(self) -> Text:
        m = self.d.machine
        return Text(f"{views.systick(m)[0]}  |  {views.nvic(m)[0]}", style="dim", no_wrap=True, overflow="crop")

    def _output(self, height: int, width: int) -> Text:
        lines = list(self.log)[-max(1, height):]
        return Text("\n".join(ln[:max(1, width)] for ln in lines), no_wrap=True, overflow="crop")

    def render(self, width: int, height: int) -> Layout:
        top_h = max(6, (height - 6) * 11 // 18)
        mid_h = max(3, height - 6 - top_h)
        root = Layout()
        root.split_column(
            Layout(name="top", size=top_h), Layout(name="mid", size=mid_h), Layout(name="status", size=1),
            Layout(name="devices", size=1), Layout(name="output", size=3), Layout(name="input", size=1))
        reg_w = min(34, max(20, width // 2))
        root["top"].split_row(Layout(self._source(top_h, width - reg_w), name="src"),
                              Layout(self._registers(), name="regs", size=reg_w))
        left_w = width // 2
        root["mid"].split_row(Layout(self._stack(mid_h, left_w), name="stack", size=left_w),
                              Layout(self._pka(mid_h, width - left_w), name="pka"))
        root["status"].update(self._status())
        root["devices"].update(self._devices())
        root["output"].update(self._output(3, width))
        prompt = Text("(pkasim) ", style="bold cyan", no_wrap=True, overflow="crop")
        prompt.append(self.input)
        prompt.append(" ", style="reverse")
        prompt.append(f"   {KEY_HELP}"[:max(0, width - len(self.input) - 11)], style="dim")
        root["input"].update(prompt)
        return root


class _Terminal:
    """Raw keyboard input; the saved mode comes back in ``restore``."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.saved = termios.tcgetattr(fd)

    def raw(self) -> None:
        """Keys one at a time, no echo, Ctrl-C/Ctrl-S as keys; output processing stays
        on (rich writes newlines)."""
        mode = termios.tcgetattr(self.fd)
        mode[tty.IFLAG] &= ~(termios.IXON | termios.ICRNL | termios.INLCR)
        mode[tty.LFLAG] &= ~(termios.ECHO | termios.ICANON | termios.ISIG | termios.IEXTEN)
        mode[tty.CC][termios.VMIN] = 1
        mode[tty.CC][termios.VTIME] = 0
        termios.tcsetattr(self.fd, termios.TCSAFLUSH, mode)

    def restore(self) -> None:
        termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)

    def interrupted(self) -> bool:
        """A Ctrl-C waiting in the input (asked between run slices)."""
        while select.select([self.fd], [], [], 0)[0]:
            if os.read(self.fd, 1) == b"\x03":
                return True
        return False

    def key(self, timeout: float) -> str | None:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return None
        data = os.read(self.fd, 1)
        if data == b"\x1b":
            while select.select([self.fd], [], [], 0.03)[0]:
                data += os.read(self.fd, 1)
                if data[-1:].isalpha() or data[-1:] == b"~":
                    break
        return data.decode("utf-8", errors="replace")


def run_tui(build: Callable[[Any], Debugger], title: str, console: Console) -> int:
    """Run the full-screen debugger. ``build(sink)`` makes the debugger, its machine
    writing the firmware's output to ``sink``: the command that starts the TUI knows how
    to build a machine from its arguments; the TUI only shows it."""
    log: deque = deque(maxlen=OUTPUT_LINES)
    sink = _Output(log)
    debugger = build(sink)
    log.append(f"pkasim debug {title}: 'help' lists the commands; {KEY_HELP}")
    screen = Screen(debugger, log)
    term = _Terminal(sys.stdin.fileno())
    resized = [False]
    old_handler = signal.signal(signal.SIGWINCH, lambda *_: resized.__setitem__(0, True))
    debugger.interrupted = term.interrupted
    history: list[str] = []
    hist_pos = 0
    last = ""
    console = Console(highlight=False)
    try:
        term.raw()
        with Live(console=console, screen=True, auto_refresh=False, transient=True) as live:
            def draw() -> None:
                try:  # the terminal's size now (not $COLUMNS/$LINES, which do not follow a resize)
                    w, h = os.get_terminal_size(sys.stdout.fileno())
                except OSError:
                    w, h = console.size
                console.size = (w, h)
                live.update(screen.render(w, h), refresh=True)

            draw()
            while not debugger.quit:
                key = term.key(0.25)
                if key is None:
                    if resized[0]:
                        resized[0] = False
                        draw()
                    continue
                command = None
                if key in KEYS:
                    command = KEYS[key]
                elif key in ("\r", "\n"):
                    command = screen.input.strip() or last
                    screen.input = ""
                elif key in ("\x7f", "\x08"):
                    screen.input = screen.input[:-1]
                elif key == "\x04":
                    break
                elif key == "\x03":
                    screen.input = ""
                elif key == "\x0c":
                    console.clear()
                elif key == "\x1b[A" and history:
                    hist_pos = max(0, hist_pos - 1)
                    screen.input = history[hist_pos]
                elif key == "\x1b[B" and history:
                    hist_pos = min(len(history), hist_pos + 1)
                    screen.input = history[hist_pos] if hist_pos < len(history) else ""
                elif key.isprintable() and not key.startswith("\x1b"):
                    screen.input += key
                if command:
                    if not history or history[-1] != command:
                        history.append(command)
                    hist_pos = len(history)
                    last = command
                    log.append(f"(pkasim) {command}   running... (Ctrl-C interrupts)")
                    draw()
                    log[-1] = f"(pkasim) {command}"
                    log.extend(debugger.execute(command))
                draw()
    finally:
        term.restore()
        signal.signal(signal.SIGWINCH, old_handler)
    return 0
