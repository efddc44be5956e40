"""Rank side: what the watchdog's signal does, and putting back what was there before.

faulthandler writes every thread's Python stack from C, inside the signal handler, so the dump is made
even while the main thread is blocked in a collective (in C++, holding or not holding the GIL).  A handler
the user installed earlier is chained (faulthandler calls it after the dump); the default action (which
ends the process for SIGUSR1) or an ignore disposition is never chained to.
"""
import faulthandler
import os
import signal as _signal


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


def dump_threads(path, header):
    """Append every thread's Python stack to ``path``, in faulthandler's format, from a thread holding the
    GIL (the rank's helper thread, asked by the watchdog): consistent, and safe while other threads run,
    where faulthandler's dump from the signal handler reads other threads' frames without the GIL and can
    crash the process (seen once on torch 2.15 with 10,000 async calls completing on the helper thread)."""
    import sys
    import threading
    import traceback
    me = threading.get_ident()
    out = ["\n=== c10d_observer: %s ===\n" % header]
    for ident, frame in list(sys._current_frames().items()):
        out.append("%s 0x%016x (most recent call first):\n" % ("Current thread" if ident == me else "Thread", ident))
        for fs in reversed(traceback.extract_stack(frame, limit=100)):
            out.append('  File "%s", line %s in %s\n' % (fs.filename, fs.lineno, fs.name))
        out.append("\n")
    with open(path, "a") as f:
        f.write("".join(out))


class StackDumpHandler(object):
    def __init__(self, signum, path):
        self.signum = signum
        self.path = path
        self._file = None
        self.view = None  # what signal.getsignal() says once installed: anything else replaced ours
        self.os_view = None  # the kernel's handler address once installed (faulthandler's), where readable

    def install(self):
        previous = self.previous = _signal.getsignal(self.signum)
        # None: a handler installed from C; a callable: from Python.  Both are called after the dump.
        chain = previous not in (_signal.SIG_DFL, _signal.SIG_IGN)
        self._file = open(self.path, "a")
        try:
            faulthandler.register(self.signum, file=self._file, all_threads=True, chain=chain)
        except BaseException:
            self._close()
            raise
        self.chained = chain
        self.view = _signal.getsignal(self.signum)
        self.os_view = os_handler(self.signum)

    def replaced_by(self):
        """None while ours is the handler in place; else what replaced it (signal.signal() after enable(),
        as PyTorch Lightning does for SLURM requeue, or a handler set from C), described."""
        if self._file is None:
            return None
        current = _signal.getsignal(self.signum)
        if self.os_view:
            now = os_handler(self.signum)
            if now is not None:
                if now == self.os_view:
                    return None
                if now in (0, 1):  # SIG_DFL, SIG_IGN
                    return describe_handler(_signal.SIG_DFL if now == 0 else _signal.SIG_IGN)
                if current is self.view or current == self.view:  # Python's view did not change
                    return "a handler installed outside Python's signal module (from C)"
                return describe_handler(current)
        if current is self.view or current == self.view:
            return None
        return describe_handler(current)

    def uninstall(self):
        if self._file is None:
            return
        current = _signal.getsignal(self.signum)  # a handler the user set while we were installed
        try:
            faulthandler.unregister(self.signum)  # puts back what was there before install()
            if current is not self.previous and current is not None:
                _signal.signal(self.signum, current)  # theirs wins over the older one
        finally:
            self._close()

    def _close(self):
        f, self._file = self._file, None
        if f is None:
            return
        f.close()
        try:  # no dump was made (at most the observer's own note on its threads): leave nothing behind
            with open(self.path) as f:
                text = f.read(1 << 16)
            if "Thread 0x" not in text and "Current thread" not in text and "Stack (most recent" not in text:
                os.unlink(self.path)
        except OSError:
            pass
