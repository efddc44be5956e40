"""Rank side: what the watchdog's signal does, and putting back what was there before.

faulthandler writes every thread's Python stack from C, inside the signal handler, so the dump is made
even while the main thread is blocked in a collective (in C++, holding or not holding the GIL).  A handler
the user installed earlier is chained (faulthandler calls it after the dump); the default action (which
ends the process for SIGUSR1) or an ignore disposition is never chained to.
"""
import faulthandler
import os
import signal as _signal


class StackDumpHandler(object):
    def __init__(self, signum, path):
        self.signum = signum
        self.path = path
        self._file = None

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
        try:
            if os.path.getsize(self.path) == 0:
                os.unlink(self.path)
        except OSError:
            pass
