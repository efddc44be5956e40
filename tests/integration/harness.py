"""Launch real gloo ranks (one process each, FileStore rendezvous: no port) running a scenario.

A scenario is a function in scenarios.py.  Ranks that play the culprit stall by waiting for the file
``release`` in the job's work dir: the test creates it once it has seen what it waits for, so every job
ends cleanly.  Ranks write facts as JSON (``rank<R>.json``) for the test to assert on.

Ranks are forked from a zygote that imported torch once (zygote.py: about 1.5 s of CPU saved per rank);
a job whose ranks must start as fresh interpreters (a wrapper command, ``C10D_OBSERVER=1`` or a variable
torch reads at import in its environment, or ``C10D_TEST_FRESH_RANKS=1`` in the test's) gets ``Popen``.
"""
import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RANK_MAIN = os.path.join(HERE, "rank_main.py")


def wait_until(predicate, timeout, what):
    """Wait for a condition on files or processes; fail loudly with ``what`` (or what it returns, called at
    the failure: a log read then) if it never holds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %g s waiting for %s" % (timeout, what() if callable(what) else what))
        time.sleep(0.05)


ZYGOTE = os.path.join(HERE, "zygote.py")
# The observer's fixed times in the tests' jobs (config.Timing, C10D_OBSERVER_TIMING; tests/README.md): a soft
# verdict after 2 s rather than 10, a gather that waits 1 s for a silent rank rather than 2, an abort that
# gives the culprit 2 s rather than 6.  The frozen-after window and SIGKILL's delay keep their defaults (a
# loaded machine must not make a rank look frozen).  ``Job(timing=None)``: the defaults users get.
TEST_TIMING = "learned_floor=2,phase_gap=6,gather_wait=1,abort_grace=2,arrivals_period=0.5,relay_period=1"


def timings():
    """A test of a promise runs at the test times (quick tier) and once at the defaults users get (full tier):
    ``@pytest.mark.parametrize("timing", timings())``."""
    import pytest
    return [pytest.param(TEST_TIMING, id="test_times"), pytest.param(None, id="user_times", marks=pytest.mark.full)]


def no_timeout_env(timing):
    """The environment of a job with no timeout chosen: at the test times, a poll of 0.25 s (its default is
    1 s there, and a learned deadline is never below three polls: 3 s past a floor of 2)."""
    return {"C10D_OBSERVER_POLL_INTERVAL": "0.25"} if timing else {}


def floor_s(timing):
    """The learned deadlines' floor a job with this ``timing`` runs with (s): scenario durations scale with it."""
    from c10d_observer import config
    return (config.Timing.parse(timing) if timing else config.DEFAULT_TIMING).learned_floor_s


def _fresh_only(env, wrap):
    """Whether a rank with this extra environment and wrapper must start as a fresh interpreter."""
    if wrap or os.environ.get("C10D_TEST_FRESH_RANKS", "").strip() not in ("", "0"):
        return True
    return any(k == "C10D_OBSERVER" or k.startswith(("TORCH_", "PYTHON", "LD_", "OMP_", "MKL_"))
               for k in (env or {}))


class ForkedRank(object):
    """A rank the zygote forked, as far as the tests use a ``Popen``: pid, poll, wait, send_signal, kill."""

    def __init__(self, pid, args):
        self.pid = pid
        self.args = args
        self.returncode = None
        self._ended = threading.Event()

    def _exited(self, code):
        self.returncode = code
        self._ended.set()

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def send_signal(self, sig):
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self):
        self.send_signal(signal.SIGKILL)


class _Zygote(object):
    """This test process's zygote (zygote.py), started at its first job; one per process (pytest-xdist
    workers each have theirs)."""

    _lock = threading.Lock()
    _one = None

    @classmethod
    def get(cls, env):
        with cls._lock:
            if cls._one is None or cls._one.proc.poll() is not None:
                cls._one = cls(env)
            return cls._one

    def __init__(self, env):
        r, w = os.pipe()
        env = {k: v for k, v in env.items() if k != "C10D_OBSERVER"}
        self.proc = subprocess.Popen([sys.executable, ZYGOTE, str(w)], stdin=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, pass_fds=(w,), env=env, cwd=os.getcwd())
        os.close(w)
        self._replies = os.fdopen(r, "r")
        self._ranks = {}  # pid -> ForkedRank
        self._early = {}  # pid -> exit status that came before its rank was known
        self._forked = []  # pids forked, not yet claimed by a request
        self._cond = threading.Condition()
        self._send = threading.Lock()
        threading.Thread(target=self._read, name="zygote-replies", daemon=True).start()

    def _read(self):
        for line in self._replies:
            msg = json.loads(line)
            with self._cond:
                if "status" in msg:
                    rank = self._ranks.pop(msg["pid"], None)
                    if rank is not None:
                        rank._exited(msg["status"])
                    else:
                        self._early[msg["pid"]] = msg["status"]
                else:
                    self._forked.append(msg["pid"])
                self._cond.notify_all()
        with self._cond:  # the zygote is gone: whatever it had not reaped is lost to us
            for rank in self._ranks.values():
                rank._exited(-signal.SIGKILL)
            self._ranks.clear()
            self._cond.notify_all()

    def fork(self, argv, env, log_path):
        with self._send:
            self.proc.stdin.write((json.dumps({"argv": argv, "env": env, "cwd": os.getcwd(),
                                               "log": log_path}) + "\n").encode())
            self.proc.stdin.flush()
            with self._cond:
                if not self._cond.wait_for(lambda: self._forked or self.proc.poll() is not None, 60) \
                        or not self._forked:
                    raise RuntimeError("the test zygote did not fork a rank (exit %r)" % self.proc.poll())
                pid = self._forked.pop(0)
                rank = ForkedRank(pid, argv)
                if pid in self._early:
                    rank._exited(self._early.pop(pid))
                else:
                    self._ranks[pid] = rank
        return rank


class Job(object):
    main = RANK_MAIN  # the script each rank runs (tests/gpu runs its own)

    def __init__(self, scenario, world_size, tmp_path, env=None, wrap=(), timing=TEST_TIMING, **args):
        """``wrap``: a command each rank runs under (``unshare ... sh -c '...; exec "$@"' sh``); ``timing``:
        the observer's fixed times (C10D_OBSERVER_TIMING; None: the defaults users get)."""
        self.scenario = scenario
        self.world_size = world_size
        self.work_dir = str(tmp_path / "work")
        self.dump_dir = str(tmp_path / "dumps")
        os.makedirs(self.work_dir)
        os.makedirs(self.dump_dir, exist_ok=True)  # a test may have mounted a filesystem there
        self.args = dict(args, dump_dir=self.dump_dir)
        self.procs = []
        self.logs = []
        base_env = dict(os.environ)
        base_env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, base_env.get("PYTHONPATH")) if p)
        for k in list(base_env):
            if k.startswith("C10D_OBSERVER_"):
                del base_env[k]
        if timing:
            base_env["C10D_OBSERVER_TIMING"] = timing
        self.timing = timing
        zygote = None if self.main != RANK_MAIN or _fresh_only(env, wrap) else _Zygote.get(dict(base_env))
        base_env.update(env or {})
        for rank in range(world_size):
            log = open(os.path.join(self.work_dir, "rank%d.log" % rank), "w+")
            self.logs.append(log)
            e = dict(base_env, RANK=str(rank), WORLD_SIZE=str(world_size))
            argv = [sys.executable, self.main, scenario, str(rank), str(world_size), self.work_dir,
                    json.dumps(self.args)]
            if zygote is not None:
                self.procs.append(zygote.fork(argv, e, log.name))
            else:
                self.procs.append(subprocess.Popen(list(wrap) + argv, stdout=log, stderr=subprocess.STDOUT, env=e))

    # -- files the ranks write ---------------------------------------------------------------------
    def release(self):
        with open(os.path.join(self.work_dir, "release"), "w"):
            pass

    def facts(self, rank):
        path = os.path.join(self.work_dir, "rank%d.json" % rank)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)

    def wait_facts(self, rank, key, timeout=60):
        return wait_until(lambda: (self.facts(rank) or {}).get(key), timeout,
                          lambda: "rank %d to record %r\n%s" % (rank, key, self.log_text()))

    def reports(self):
        out = {}
        for path in glob.glob(os.path.join(self.dump_dir, "report-rank*.json")):
            with open(path) as f:
                rep = json.load(f)
            out[rep["rank"]] = rep
        return out

    def wait_report(self, rank, timeout=60, until=None):
        """Rank ``rank``'s report, once there is one (and ``until(report)`` holds, where given: a later hang's
        report, where an earlier call may be overdue a moment on a loaded machine)."""
        def ready():
            rep = self.reports().get(rank)
            return rep if rep and (until is None or until(rep)) else None
        return wait_until(ready, timeout, lambda: "a report from rank %d\n%s" % (rank, self.log_text()))

    def stacks(self, rank):
        paths = glob.glob(os.path.join(self.dump_dir, "stacks-rank%d-*.txt" % rank))
        if not paths:
            return ""
        with open(paths[0]) as f:
            return f.read()

    def wait_stacks(self, rank, needle, timeout=60):
        return wait_until(lambda: needle in self.stacks(rank) and self.stacks(rank), timeout,
                          lambda: "%r in the stack dump of rank %d\n%s" % (needle, rank, self.log_text()))

    def wait_signalled(self, rank, timeout=60):
        """Until the watchdog has sent rank ``rank`` its signal: the mark it writes just before (the rank's
        handler takes it away when it runs, once the main thread is back in Python)."""
        pid = self.wait_facts(rank, "pid", timeout)
        from c10d_observer import dumpdir
        path = os.path.join(self.dump_dir, dumpdir.notify_name(pid))
        return wait_until(lambda: os.path.exists(path), timeout,
                          lambda: "the signal to rank %d (%s)\n%s" % (rank, path, self.log_text()))

    def log_text(self, tail=4000):
        """The ranks' logs, the last ``tail`` characters of each (None: whole)."""
        out = []
        for rank, log in enumerate(self.logs):
            log.flush()
            with open(log.name) as f:
                out.append("--- rank %d log ---\n%s" % (rank, f.read()[-tail if tail else 0:]))
        return "\n".join(out)

    # -- processes ---------------------------------------------------------------------------------
    def finish(self, timeout=90):
        """Wait for every rank; returns their exit codes."""
        codes = []
        deadline = time.monotonic() + timeout
        for p in self.procs:
            try:
                codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError("ranks did not finish within %g s\n%s" % (timeout, self.log_text()))
        return codes

    def kill(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
        for p in self.procs:
            p.wait()

    def close(self):
        self.kill()
        for log in self.logs:
            log.close()


def reported(job, rank, entry=None, before=None):
    """The overdue entries ``rank`` reported: those of the call ``entry`` (another report's entry), and those
    detected before the wall time ``before`` (the release).  A culprit never waits in the call it stalled
    before while the hang lasts; once released, its own call, or a later one of the ranks catching up, may
    take past a 1 s timeout on a loaded machine: a report of its own, not the hang's."""
    rep = job.reports().get(rank) or {}
    return [e for e in rep.get("overdue") or ()
            if (entry is None or (e["stream"], e["seq"]) == (entry["stream"], entry["seq"]))
            and (before is None or (e.get("detected_at") or 0) < before)]


def snapshot_dir(src, dst):
    """Copy a live dump_dir: the watchdogs go on writing it (a temporary file renamed into place, a request
    withdrawn), so a file gone between the listing and its copy is skipped, as it would be a moment later."""
    import shutil
    os.makedirs(dst)
    for name in os.listdir(src):
        if name.startswith(".tmp-"):
            continue
        try:
            shutil.copy2(os.path.join(src, name), os.path.join(dst, name))
        except FileNotFoundError:
            pass


def pid_alive(pid):
    """True while ``pid`` runs; a zombie (exited, not yet reaped) counts as gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def children_of(pid):
    out = set()
    for path in glob.glob("/proc/%d/task/*/children" % pid):
        try:
            with open(path) as f:
                out.update(int(x) for x in f.read().split())
        except OSError:
            pass
    return out


def free_port():
    """A free TCP port on loopback (for a launcher's rendezvous; never a fixed one)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_verdict(dump_dir, timeout=60, log="", level=None):
    """The verdict.json the firing watchdog merges (waits for it; with ``level="hard"``, until the one merged
    at the hard deadline has replaced any learned one)."""
    path = os.path.join(dump_dir, "verdict.json")

    def ready():
        if not os.path.exists(path):
            return None
        with open(path) as f:
            try:
                v = json.load(f)
            except ValueError:  # being replaced
                return None
        return v if level is None or v.get("level") == level else None

    return wait_until(ready, timeout, "a %sverdict in %s\n%s" % (level + " " if level else "", dump_dir, log))


def wait_signal_sent(dump_dir, timeout=30, log=""):
    """Until a watchdog has sent its rank the signal (the mark it writes just before, which the rank's handler
    takes away when it runs: a rank blocked in the collective runs it once the collective returns)."""
    return wait_until(lambda: glob.glob(os.path.join(dump_dir, "notify-pid*.json")), timeout,
                      "a watchdog's signal in %s\n%s" % (dump_dir, log))


def report_after(dump_dir):
    """``report --json DIR`` once the job is over: (its document, its exit code)."""
    out = subprocess.run([sys.executable, "-m", "c10d_observer", "report", "--json", dump_dir],
                         stdout=subprocess.PIPE, universal_newlines=True, env=dict(os.environ, PYTHONPATH=ROOT))
    return json.loads(out.stdout), out.returncode


def assert_caught_up(dump_dir, culprit, live=None):
    """Issue 24: after a late rank caught up and the job ended, ``report`` still names it, says the hang
    resolved, and exits 3; the record says what the verdict said live."""
    doc, rc = report_after(dump_dir)
    assert doc["culprit_ranks"] == [culprit], doc["summary"]
    assert rc == 3 and doc["hangs"] and all(h["outcome"]["state"] == "resolved" for h in doc["hangs"]), doc["hangs"]
    if live is not None:
        assert doc["summary"] == live["summary"] and doc["gather_id"] == live["gather_id"]
    return doc
