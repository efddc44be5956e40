"""Rank side: the observer's two signals, the helper's stack dump, and putting back what was there before.

- The **notification** (``NotifyHandler``, the configured signal, SIGUSR1 by default): the watchdog sends it
  to the rank once per hang, when a call of the rank's own is overdue.  The observer's handler only
  passes it on to the handler the job had before enable() (a Python handler: called with the signal and
  the frame; one set from C: faulthandler's chain, dumping the receiving thread only); the default action
  (which ends the process for SIGUSR1) or an ignore disposition is never chained to.  It dumps nothing.
- The **stack dump** (``DumpSignal``): faulthandler's all-thread dump from C, registered on a real-time
  signal of its own that no handler of the job uses.  It reads other threads' frames without the GIL (on
  torch 2.15 it once crashed a rank with 10,000 async calls completing on the helper thread), so it is
  only the fallback for a rank whose helper thread cannot answer (a thread holds the GIL); it can never
  run a handler of the job's.
- ``dump_threads``: what the helper thread writes when the watchdog asks by a file: every thread's stack,
  with the GIL held (consistent, safe while other threads run), in faulthandler's format (dumpdir.py).
"""
import faulthandler
import os
import signal as _signal

from . import stackfile as _stackfile

_LIBC = []


def os_handler(signum):
    """The address of the handler the kernel runs for ``signum`` (the first field of ``sigaction``'s
    struct, the handler union, on glibc, musl and macOS), or None where it cannot be read.  This sees what
    Python's ``signal.getsignal`` cannot: faulthandler's C handler, a handler set from C, and a
    ``signal.signal(sig, SIG_DFL)`` that puts back the Python-level value but drops faulthandler's."""
    try:
        import ctypes
        if not _LIBC:
            _LIBC.append(ctypes.CDLL(None, use_errno=True))
        buf = ctypes.create_string_buffer(512)  # larger than any platform's struct sigaction
        if _LIBC[0].sigaction(int(signum), None, buf) != 0:
            return None
        return ctypes.c_void_p.from_buffer(buf).value or 0
    except Exception:
        return None


def describe_handler(handler):
    """What a signal handler is, for a user: 'lightning...._slurm_sigusr_handler_fn (connector.py:42)'."""
    if handler is _signal.SIG_DFL:
        return "the default action (SIG_DFL: the process ends)"
    if handler is _signal.SIG_IGN:
        return "SIG_IGN (the signal is ignored)"
    if handler is None:
        return "a handler installed from C"
    fn = getattr(handler, "__func__", handler)
    code = getattr(fn, "__code__", None)
    name = "%s.%s" % (getattr(fn, "__module__", None) or "?", getattr(fn, "__qualname__", None) or repr(fn))
    if code is not None:
        name += " (%s:%d)" % (os.path.basename(code.co_filename), code.co_firstlineno)
    return name


def dump_threads(path, header, dd=None):
    """Append every thread's Python stack to the stacks file, in faulthandler's format, from a thread holding
    the GIL (the rank's helper thread, asked by the watchdog).  ``dd``: the DumpDir (its spill directory
    takes the dump where dump_dir is full)."""
    import sys
    import threading
    import traceback
    me = threading.get_ident()
    threads = []
    for ident, frame in list(sys._current_frames().items()):
        frames = [(fs.filename, fs.lineno, fs.name) for fs in reversed(traceback.extract_stack(frame, limit=100))]
        threads.append((ident, frames))
    text = _stackfile.format_dump(header, threads, current=me)
    if dd is not None:
        return dd.append_text(os.path.basename(path), text)
    with open(path, "a") as f:
        f.write(text)
    return path


class NotifyHandler(object):
    """The observer's handler of the notification signal: it passes the signal on to the handler the job
    had before enable() and does nothing else.  ``replaced_by()`` says when code replaced it after enable()
    (the watchdog then sends no signal: it would run their handler)."""

    def __init__(self, signum):
        self.signum = signum
        self.previous = None
        self.installed = False
        self.via_faulthandler = False  # the job's handler was set from C: faulthandler chains to it
        self._file = None
        self.view = None  # what signal.getsignal() says once installed: anything else replaced ours
        self.os_view = None  # the kernel's handler address once installed, where readable
        self.received = 0
        self.mine = None  # () -> whether the watchdog sent the signal now received (observer.py), or None
        self.foreign = 0  # signals received that the watchdog did not send
        self.said_foreign = None  # (signum, had) -> None: says once what a foreign signal met (observer.py)
        self.after = None  # () -> None, run after the job's handler: on_timeout="raise" raises there (raising.py)

    @property
    def chained(self):
        """The job's own handler is called after ours."""
        return self.previous not in (_signal.SIG_DFL, _signal.SIG_IGN)

    def install(self, devnull_path=os.devnull):
        previous = self.previous = _signal.getsignal(self.signum)
        python = previous is not None
        if python:
            try:
                _signal.signal(self.signum, self._handle)
            except ValueError:  # enable() off the main thread: Python sets handlers from the main thread only
                python = False
        if not python:
            # a handler from C, or not on the main thread: faulthandler chains to the handler in place (for a
            # Python one, Python's own C handler, which runs it); it dumps the receiving thread only, to nowhere
            self._file = open(devnull_path, "a")
            faulthandler.register(self.signum, file=self._file, all_threads=False, chain=previous not in (
                _signal.SIG_DFL, _signal.SIG_IGN))
            self.via_faulthandler = True
        self.installed = True
        self.view = _signal.getsignal(self.signum)
        self.os_view = os_handler(self.signum)

    def _handle(self, signum, frame):
        self.received += 1
        prev = self.previous
        if self.mine is not None and not self.mine():
            self.foreign += 1  # Slurm's --signal, a kill: with no handler of the job's own it meets nothing
            if not callable(prev) and self.said_foreign is not None:
                self.said_foreign(signum, prev)
        if callable(prev):
            prev(signum, frame)
        if self.after is not None:
            self.after()

    def replaced_by(self):
        """None while ours is the handler in place; else what replaced it (signal.signal() after enable(),
        as PyTorch Lightning does for SLURM requeue, or a handler set from C), described."""
        if not self.installed:
            return None
        current = _signal.getsignal(self.signum)
        if not (current is self.view or current == self.view):
            return describe_handler(current)
        if self.os_view:
            now = os_handler(self.signum)
            if now is not None and now != self.os_view:
                if now in (0, 1):  # SIG_DFL, SIG_IGN
                    return describe_handler(_signal.SIG_DFL if now == 0 else _signal.SIG_IGN)
                return "a handler installed outside Python's signal module (from C)"
        return None

    def uninstall(self):
        if not self.installed:
            return
        self.installed = False
        current = _signal.getsignal(self.signum)  # a handler the user set while we were installed
        try:
            if self.via_faulthandler:
                faulthandler.unregister(self.signum)  # puts back what was there before install()
                if current is not self.previous and current is not None:
                    _signal.signal(self.signum, current)
            elif current is self.view or current == self.view:
                _signal.signal(self.signum, self.previous if self.previous is not None else _signal.SIG_DFL)
            # else: theirs, set after ours, wins over the older one: left as it is
        finally:
            if self._file is not None:
                self._file.close()
                self._file = None


def free_realtime_signal(avoid=()):
    """A real-time signal no handler uses (Python's view and the kernel's both at the default), from the
    top of the range down, or None."""
    if not hasattr(_signal, "SIGRTMIN"):
        return None
    for s in range(_signal.SIGRTMAX - 1, _signal.SIGRTMIN + 2, -1):
        if s in avoid:
            continue
        try:
            if _signal.getsignal(s) is _signal.SIG_DFL and os_handler(s) in (0, None):
                return s
        except (ValueError, OSError):
            continue
    return None


class DumpSignal(object):
    """faulthandler's all-thread dump to the stacks file, on a signal of the observer's own: the fallback
    for a rank whose helper thread cannot answer.  No handler of the job's is chained to it."""

    def __init__(self, path, avoid=()):
        self.path = path
        self.signum = free_realtime_signal(avoid)
        self._file = None

    def install(self):
        if self.signum is None:
            return
        self._file = open(self.path, "a")
        try:
            faulthandler.register(self.signum, file=self._file, all_threads=True, chain=False)
        except BaseException:
            self._close()
            raise

    def uninstall(self):
        if self._file is None:
            return
        try:
            faulthandler.unregister(self.signum)
        finally:
            self._close()

    def note(self, text):
        """A line in the stacks file from the rank itself (which of its threads are the observer's)."""
        f = self._file
        if f is not None:
            try:
                f.write(text)
                f.flush()
            except (OSError, ValueError):
                pass

    def _close(self):
        f, self._file = self._file, None
        if f is None:
            return
        f.close()
        try:  # no dump was made (at most the observer's own note on its threads): leave nothing behind
            with open(self.path) as f:
                text = f.read(1 << 16)
            if not _stackfile.has_dump(text):
                os.unlink(self.path)
        except OSError:
            pass
