"""Ranks for the tests' jobs, forked from one interpreter that has imported torch (a "zygote").

A rank of a test job is ``python rank_main.py SCENARIO RANK WORLD WORK_DIR ARGS``: a fresh interpreter
spends about 1.5 s of CPU importing torch before it does anything, and the suite starts some 250 ranks
per torch line on a 2-core machine.  This process imports torch, ``torch.distributed``, c10d_observer
(importing it does nothing) and the scenarios once, then forks each rank on request; the child becomes
that command (its argv, environment, working directory, stdout and stderr, a fresh random seed) and runs
the script as ``__main__`` (``runpy``) at the top level of this file, so that it ends as an interpreter
ends: atexit handlers, threads joined, the exit code of ``SystemExit`` or 1 on an exception.  torch's
own distributed tests fork their ranks the same way (``MultiProcessTestCase._fork_processes``).

Nothing of torch runs here before a fork: no process group, no tensor op, no thread of torch's (a thread
pool of the BLAS library numpy loads may exist; it has its own fork handlers).  Each rank is a real
process: real gloo, its own watchdog subprocess, signals, ``/proc``.  Jobs whose ranks must start as fresh
interpreters (``C10D_OBSERVER=1`` read by the .pth line at start-up, variables torch reads at import,
a wrapper command) are started with ``Popen`` as before (harness.Job decides).

Protocol: requests on stdin, one JSON object a line: ``{"argv": [...], "env": {...}, "cwd": ..., "log":
path}``; on the reply pipe (the descriptor given as argv[1]), one line per event: ``{"pid": P}`` once
forked (in request order) and ``{"pid": P, "status": S}`` once reaped (S as ``Popen.returncode``: the exit
code, or minus the signal that ended it).  EOF on stdin ends the zygote (its children go on).
"""
import json
import os
import select
import sys


def _returncode(status):
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _preload():
    import torch  # noqa: F401
    import torch.distributed  # noqa: F401
    import c10d_observer  # noqa: F401
    import scenarios  # noqa: F401  (tests/integration, on sys.path as this file's folder)
    import rank_main  # noqa: F401


def serve(reply_fd):
    """Fork a rank per request; returns only in a forked child, with its request."""
    replies = os.fdopen(reply_fd, "w", buffering=1)
    children = set()
    buf = b""
    stdin = sys.stdin.fileno()
    eof = False
    while not eof or children:
        ready, _, _ = select.select([] if eof else [stdin], [], [], 0.02)
        if ready:
            chunk = os.read(stdin, 65536)
            if not chunk:
                eof = True
            buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            req = json.loads(line.decode())
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                replies.close()
                return req
            children.add(pid)
            replies.write(json.dumps({"pid": pid}) + "\n")
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                children.clear()
                break
            if pid == 0:
                break
            if pid in children:
                children.discard(pid)
                replies.write(json.dumps({"pid": pid, "status": _returncode(status)}) + "\n")
    sys.exit(0)


def become(req):
    """This forked child takes the request's command line, environment, folder and output."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.environ.clear()
    os.environ.update(req["env"])
    os.chdir(req["cwd"])
    sys.argv = list(req["argv"][1:])
    import random
    random.seed()  # a fresh interpreter seeds from the OS; a fork would share this one's sequence
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()


if __name__ == "__main__":
    _preload()
    _req = serve(int(sys.argv[1]))
    become(_req)
    del _req
    import runpy
    runpy.run_path(sys.argv[0], run_name="__main__")
