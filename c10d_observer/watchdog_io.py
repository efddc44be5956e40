"""What the watchdog does to the world: the rank's documents, its signals, its stacks, the gather's files,
the end of the rank.  watchdog.py decides (the Detector and the protocols, on a clock it is given); these
act, each on one thing, and never decide.  No torch.

- ``Notifier``: the configured signal, to the rank, where the observer's handler is still the one in place.
- ``StackTaker``: the rank's stacks: a request to its helper thread, the dump signal, py-spy.
- ``GatherFiles``: the gather request, the answers, the merge into the verdict and its record.
- ``Arrivals``: this rank's calls' starts, and where it leads its node, the node's stragglers (a thread of its own).

The rank's documents are rank_docs.py's; the rank's end (on_timeout="abort"), watchdog_end.py's; what /proc says of a process, procs.py's.
"""
import contextlib
import gc
import os
import socket
import subprocess
import threading
import time

from . import election as _election
from . import procs as _procs
from . import stackfile as _stackfile
from . import arrivals as _arrivals
from . import config as _config
from . import documents as _documents
from . import dumpdir as _dumpdir
from . import requests as _requests
from . import verdict as _verdict
from .levels import Level
from .text import short_clock

PY_SPY_EVERY_S = 60.0
PY_SPY_LIMIT_S = 30.0


@contextlib.contextmanager
def collector_paused():
    """No automatic collection of cycles inside: a merge reads every rank's document, millions of tuples at
    16,384 ranks, and the collector, woken by their allocations, walked the growing heap again and again (0.8 s of
    a 2.3 s merge, benchmarks/scale.py's merging node's files read offline, 2026-12-02; the harness itself
    runs with the collector off, so its times had left that out).  The watchdog's own process only (the job's
    is never touched); what the merge leaves holds no cycles, and a later collection finds any."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Part(object):
    """What every part holds: the watchdog's config, the channel's reader, dump_dir, the console, the
    wall clock, and how to signal the rank."""

    def __init__(self, cfg, reader, dd, log=None, wall=time.time, kill=os.kill):
        self.cfg = cfg
        self.reader = reader
        self.dd = dd
        self.log = log
        self.wall = wall
        self.kill = kill


class Notifier(_Part):
    """The configured signal, sent to the rank (once per hang: the Detector decides when), where the
    observer's handler is still the one installed: it then runs the handler the job had before enable().
    Where code replaced the observer's handler after enable(), it is never sent (it would run theirs), said
    once per handler."""

    def __init__(self, cfg, reader, dd, kill, log, wall=time.time):
        _Part.__init__(self, cfg, reader, dd, log, kill=kill)
        self.withheld_by = None
        self.wall = wall

    def notify(self, reason=None):
        if self.cfg.signal is None or self.withheld() is not None:
            return False
        try:  # the rank's handler tells the observer's signal from one the scheduler sent by this mark
            _requests.NotifyMark.mark(self.dd, self.cfg.rank_pid, time.time())
        except OSError:
            pass
        self.kill(self.cfg.rank_pid, self.cfg.signal)
        return True

    def say_overdue(self, e, deadline_text, last_report):
        """The console line of a call found overdue: its level, what, for how long, the report and stacks."""
        by = self.withheld_by if self.cfg.signal is not None else None
        self.log("rank %s: %s: %s in flight for %.1f s (%s); report %s; stacks %s%s" % (
            self.reader.rank()[0], e.level, e.describe(), e.age_s, deadline_text, last_report or "not written",
            self.cfg.stack_path, " (no %s sent: its handler was replaced by %s)" % (self.cfg.signal_name, by)
            if by else ""))

    def send(self, reason, v, answered, entries):
        """The signal, and a console line for it: to whom, when, why, and when its handler can run; under
        on_timeout="raise", first the request that the rank raise the verdict (raising.RankRaise)."""
        if self.cfg.on_timeout == "raise":  # first: the rank's handler raises what it finds with the signal
            self.ask_raise(reason, v, answered, entries,
                           signal_sent=self.cfg.signal is not None and self.withheld() is None)
        if self.notify(reason):
            self.log("rank %s: %s sent to pid %s (%s); the job's handler runs once this rank's main thread is "
                     "back in Python: it waits in a call in C++, so not before that call returns (docs/contracts.md, "
                     "\"The signal\")" % (self.reader.rank()[0], self.cfg.signal_name, self.cfg.rank_pid, reason))

    def ask_raise(self, reason, v, answered, entries, signal_sent=False):
        """on_timeout="raise": ask the rank to raise CollectiveHang, carrying the verdict, and to end its hard
        calls' waits where torch can (NCCL).  Once per gather; a request that cannot be written is said.
        ``v``: the last verdict read, ``answered``: the gather this rank answered, ``entries``: the detector's;
        ``signal_sent``: the job's signal follows, and the rank's handler raises (raising.RankRaise)."""
        mine = v is not None and answered is not None and v.gather_id == answered
        hard = [e for e in entries if e.in_flight and e.level == Level.HARD]
        req = _requests.RaiseRequest(
            gather_id=v.gather_id if mine else "no-verdict-%d" % len(entries),
            groups=sorted(set(e.group for e in hard)), calls=[e.describe() for e in hard],
            verdict=(v.summary or "").replace("c10d_observer: ", "", 1) if mine else
            "no verdict came within the gather window: %s" % reason,
            culprit_ranks=list(v.culprit_ranks or ()) if mine else [],
            verdict_path=self.dd.path(_dumpdir.VERDICT_TEXT), written_at=self.wall(), signal_sent=signal_sent)
        try:
            req.send(self.dd, self.cfg.rank_pid)
        except OSError as e:
            self.log("rank %s: on_timeout=raise: cannot ask rank pid %s to raise (%s): it goes on"
                     % (self.reader.rank()[0], self.cfg.rank_pid, e))
            return
        self.log("rank %s: on_timeout=raise: asked rank pid %s to raise CollectiveHang for %s"
                 % (self.reader.rank()[0], self.cfg.rank_pid, "; ".join(req.calls) or reason))

    def withheld(self):
        by = self.replaced_by()
        if by is not None and by != self.withheld_by:
            self.withheld_by = by
            self.log("rank %s: no %s sent: its handler was replaced after enable() by %s (the signal would run "
                     "it); stacks come from the rank's helper thread%s.  To have both, choose another signal: "
                     "enable(signal=signal.SIGUSR2), C10D_OBSERVER_SIGNAL=SIGUSR2 or run --signal SIGUSR2"
                     % (self.reader.rank()[0], self.cfg.signal_name, by, " and py-spy" if self.cfg.py_spy else ""))
        return by

    def replaced_by(self):
        """None while the rank says the observer's handler is the one installed; else what replaced it."""
        if not self.reader.handler_replaced():
            return None
        said = _requests.HandlerReplaced.read(self.dd, self.reader.rank()[0], self.cfg.rank_pid)
        return (said.replaced_by if said is not None else None) or "another handler (not named)"

    def handler_state(self):
        by = self.replaced_by()
        return {"signal": self.cfg.signal_name, "ours": by is None, "replaced_by": by,
                "signal_withheld": self.withheld_by is not None, "dump_signal": _config.signal_name(self.cfg.dump_signal)}


class StackTaker(_Part):
    """The rank's stacks: a request file its helper thread answers (dump_threads, with the GIL held), the
    dump signal where it cannot (faulthandler's dump from C, on the observer's own signal), py-spy beside."""

    def __init__(self, cfg, reader, dd, kill, log, wall):
        _Part.__init__(self, cfg, reader, dd, log, wall, kill)
        self.windows = cfg.windows
        self.name = os.path.basename(cfg.stack_path)
        self.py_spy = cfg.py_spy  # its path where installed: native + Python stacks, taken from outside
        self.py_spy_proc = None
        self.py_spy_started = None
        self.py_spy_reserved = False  # its file named (and written) before py-spy starts: see reserve_py_spy

    def size(self):
        return _dumpdir.size(self.dd.path(self.name))

    def helper_alive(self, now_ns):
        """The rank's helper thread beat within ``helper_answer``: it can write the stacks itself."""
        beat = self.reader.heartbeat_ns()
        return bool(beat) and now_ns - beat < self.windows.helper_answer * 1e9

    def header(self, reason):
        return "stacks of rank %s (pid %d) at %s: %s" % (self.reader.rank()[0], self.cfg.rank_pid,
                                                         short_clock(self.wall()), reason or "asked")

    def request(self, reason):
        _requests.StackRequest.ask(self.dd, self.cfg.rank_pid, self.header(reason))

    def withdraw(self):
        _requests.StackRequest.withdraw(self.dd, self.cfg.rank_pid)

    def dump_signal(self, reason):
        """faulthandler's dump from C, on the observer's own signal (never the job's): a thread holds the
        GIL, so the helper cannot answer.  The header first, then the signal.  Returns the file's size
        after the header (the dump has come once it grows past it).

        Not to a stopped rank (SIGSTOP, a debugger: /proc says T or t): the signal would wait for its
        resume and run then, among threads starting again (and ending: torch 1.8 on Python 3.8, a rank
        stopped by a thread of its own, read a thread's state as it was freed and died of SIGSEGV in 1
        run of 12).  One line says so instead; its helper answers a later request once it runs."""
        stopped = self.stopped()
        try:
            self.dd.append_text(self.name, _stackfile.HEADER % self.header(reason))
        except OSError:
            pass
        size = self.size()
        if not stopped:
            self.kill(self.cfg.rank_pid, self.cfg.dump_signal)
            return size
        try:  # the line is what this dump has: the file grew past the header
            self.dd.append_text(self.name, "# c10d_observer: the rank is stopped (state %s: SIGSTOP or a debugger): "
                                           "no stack signal is sent to it\n" % stopped)
        except OSError:
            pass
        return size

    def stopped(self):
        """The rank's state letter where it is stopped (T, t), else None."""
        state = _procs.pid_state(self.cfg.rank_pid)
        return state if state in ("T", "t") else None

    def py_spy_path(self):
        if self.py_spy and (self.py_spy_started is not None or self.py_spy_reserved):
            return self.dd.path(_dumpdir.py_spy_name(self.reader.rank()[0], self.cfg.rank_pid))
        return None

    def _py_spy_ran_lately(self):
        return self.py_spy_started is not None and time.monotonic() - self.py_spy_started < PY_SPY_EVERY_S

    def reserve_py_spy(self):
        """py-spy will run, once the rank's helper has written its stacks (watchdog.Watchdog._stacks): its
        file is written now, saying so, so that the state answering the gather, and the verdict, name it."""
        if not self.py_spy or self.py_spy_proc is not None or self.py_spy_reserved or self._py_spy_ran_lately():
            return
        try:
            self.dd.write_text(_dumpdir.py_spy_name(self.reader.rank()[0], self.cfg.rank_pid),
                               "c10d_observer: py-spy dump --native --pid %d starts once the rank's helper thread "
                               "has written its stacks (py-spy stops the rank while it reads it)\n" % self.cfg.rank_pid)
            self.py_spy_reserved = True
        except OSError:
            pass

    def dump_py_spy(self):
        """Start ``py-spy dump --native`` of the rank (not waited for: the next polls reap it).  py-spy stops
        the rank while it reads it (about 0.25 s): at most once per PY_SPY_EVERY_S."""
        if not self.py_spy or self.py_spy_proc is not None or self._py_spy_ran_lately():
            return
        self.py_spy_reserved = False
        path = self.dd.join(_dumpdir.py_spy_name(self.reader.rank()[0], self.cfg.rank_pid))
        try:
            with open(path, "w") as out:
                self.py_spy_proc = subprocess.Popen([self.py_spy, "dump", "--native", "--pid", str(self.cfg.rank_pid)],
                                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                                    close_fds=True)
            self.py_spy_started = time.monotonic()
        except OSError as e:
            self.py_spy = None
            self.log("py-spy could not run (%s); not used again" % (e,))

    def reap_py_spy(self, force=False):
        p = self.py_spy_proc
        if p is None:
            return
        if p.poll() is None:
            if not force and time.monotonic() - self.py_spy_started < PY_SPY_LIMIT_S:
                return
            p.kill()  # a stopped or unreadable rank: do not let it hang around
            p.wait()
        self.py_spy_proc = None


class GatherFiles(_Part):
    """The gather's files on one node: the request, the answers (states, ends, other nodes' states), the
    verdict and its record.  The Gather protocol decides when; this reads and writes."""

    def __init__(self, cfg, reader, dd, wall, log):
        _Part.__init__(self, cfg, reader, dd, log, wall)
        self.request_key = None  # (mtime_ns, size) of the request file last looked at
        self.verdict_key = None  # (mtime_ns, size) of verdict.json last looked at
        self._view, self._view_key = None, None  # this rank's view of verdict.json, and the file's key it is of
        self.loaded = {}  # path -> ((mtime_ns, size), [RankDoc]): the answers the merge's scan read (merge)

    def _key(self, name):
        try:
            st = os.stat(self.dd.path(name))
            return (st.st_mtime_ns, st.st_size)
        except OSError:
            return None

    def request(self):
        """The gather request in dump_dir (a requests.GatherRequest), or None."""
        return _requests.GatherRequest.read(self.dd)

    def new_request(self):
        """The request file, where it changed since the last look, else None."""
        key = _requests.GatherRequest.stamp(self.dd)
        if key is None or key == self.request_key:
            return None
        self.request_key = key
        return self.request()

    def new_verdict(self):
        """verdict.json (this rank's view of it), where it changed since the last look, else None."""
        key = self._key(_dumpdir.VERDICT_JSON)
        if key is None or key == self.verdict_key:
            return None
        self.verdict_key = key
        return self.verdict()

    def verdict(self):
        """verdict.json, the latest verdict merged on this node, or None: this rank's view of it
        (verdict.RankView: the verdict's facts, the culprits' hosts, this rank's part of each stuck call; from
        the view file beside it where that is of the same bytes), read again only where the file changed.
        The whole verdict, typed, was 20,000 records at 16,384 ranks in every watchdog of the job (54 ms each
        to build and 11-25 ms to parse, 2026-12-01), read again at every step while on_timeout="abort" waited
        for it; the watchdog asks it nothing else (docs/scale.md)."""
        key = self._key(_dumpdir.VERDICT_JSON)
        if key is None:
            return None
        if key != self._view_key:
            self._view = _verdict.rank_view(self.dd, self.reader.rank()[0])
            self._view_key = key if self._view is not None else None  # a file not read whole: read again
        return self._view

    def ask(self, gid, now_wall, level="hard"):
        rank, world = self.reader.rank()
        _requests.GatherRequest(id=gid, job_id=self.cfg.job_id, by_rank=rank, world_size=world,
                                requested_at=now_wall, level=level).write(self.dd)

    def scan(self, gather):
        """Count the answer files that changed since the last look (a merge across nodes looks at up to one
        file per rank every 50 ms) into the Gather protocol."""
        gid = gather.owned[0]
        with collector_paused():
            for p in self.dd.glob(_dumpdir.STATE_GLOB) + self.dd.glob(_dumpdir.END_GLOB) + self.dd.glob(
                    _dumpdir.NODE_GLOB):
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                key = (st.st_mtime_ns, st.st_size)
                if gather.known(p, key):
                    continue
                try:
                    docs = _documents.load(p)
                    self.loaded[p] = (key, docs)
                except (_documents.DocumentError, OSError):
                    docs = ()  # written atomically: never half a file; read again if it changes
                gather.count(p, key, [d for d in docs if d.job_id == self.cfg.job_id], gid)

    def write_arrivals(self, doc):
        self.dd.write_json(_dumpdir.arrivals_name(doc["rank"], doc["pid"]), doc)

    def read_arrivals(self, since):
        return read_arrivals(self.dd, self.cfg.job_id, since)

    def read_relayed_arrivals(self, since):
        return read_relayed_arrivals(self.dd, self.cfg.job_id, since)

    def write_stragglers(self, doc):
        self.dd.write_json(_dumpdir.STRAGGLERS, doc)

    @staticmethod
    def stacks_arrived(wanted):
        stack_dump, before = wanted
        return before is None or _dumpdir.size(stack_dump) > before

    def merge(self, gid, waited_s):
        """verdict.txt, verdict.json and the record, from every rank's answer to ``gid``; the summary line.
        The answers the scan read are taken as it read them where their files did not change since (at
        16,384 ranks 2,047 files of another node's states, 0.6 s of the merge read twice, 2026-12-01)."""
        with collector_paused():
            docs, _ = _verdict.load_docs(self.cfg.dump_dir, gather_id=gid, loaded=self.loaded)
            self.loaded = {}
            v = _verdict.analyze(docs, world_size=self.reader.rank()[1] or None,
                                 stragglers=_arrivals.read(self.cfg.dump_dir))
            v = v.replace(gather_id=gid, gather_s=round(waited_s, 3), verdict_at=self.wall())
            _verdict.write(self.dd, v, docs)
        req = self.request()
        if req is not None and req.id == gid:  # a later detection starts a new gather rather than join this one
            req.replace(merged_at=v.verdict_at).write(self.dd)
        main = _verdict.main_record(self.cfg.dump_dir, docs)
        if main is not None and main.gather_id != gid:
            # merged after the first hang's verdict (a framework's SIGTERM handler, teardown, ranks catching up):
            # what happened after, never the job's verdict in its place (report leads with the first)
            self.log("after the verdict of %s, which stays the job's verdict (culprit ranks: %s): %s" % (
                short_clock(main.verdict_at or 0), ", ".join(str(r) for r in main.culprit_ranks or ()) or "none",
                v.summary[len("c10d_observer: "):]))
        else:
            self.log("%s (verdict: %s)" % (v.summary[len("c10d_observer: "):], self.dd.path(_dumpdir.VERDICT_TEXT)))
        return v


class Arrivals(object):
    """This rank's calls' starts (arrivals.ArrivalLog), written every period; where this rank's watchdog leads
    its node (its lowest rank that wrote within three periods: election.node_leader), the node's join of every
    rank's (arrivals.Stragglers), written to stragglers.json.

    The join runs on a thread of its own (``joining``): on the collecting node of a job across thousands of
    nodes it joins every rank's starts, seconds a period (benchmarks/straggler_join.py), and the watchdog's
    polls, its rank's deadlines and its node's gathers must not wait for it.  A period whose join before still
    runs joins nothing (the next one joins its starts: a document holds the last KEEP of each stream); a join
    that failed is raised at the next period, on the watchdog's loop, which says it once."""

    def __init__(self, cfg, files, due_ns):
        self.cfg = cfg
        self.files = files
        self.period = cfg.timings.arrivals_period_s
        self.due_ns = due_ns
        self.log = _arrivals.ArrivalLog()
        self.stragglers = _arrivals.Stragglers()
        self.joining = None  # the thread of the join under way, or of the last one
        self.failed = None  # what the last join raised, raised again on the watchdog's loop

    def observe(self, snap, now_ns, wall_now, arrivals_snap):
        """Note the starts the channel shows; whether the period's write is due."""
        self.log.observe(snap, now_ns, wall_now, arrivals_snap)
        if now_ns < self.due_ns:
            return False
        self.due_ns = now_ns + int(self.period * 1e9)
        return True

    def write(self, snap, rank, wall_now):
        """Write this rank's starts; where it leads its node and no join runs, start the period's join."""
        members = {str(st.desc.get("stream")): st.desc.get("ranks") for st in snap
                   if isinstance(st.desc.get("ranks"), list)}
        # the last KEEP starts of each stream, every period: the leader joins the calls every member has
        host = self.cfg.host or socket.gethostname()
        period = self.period
        self.files.write_arrivals(self.log.document(rank, self.cfg.rank_pid, self.cfg.job_id, wall_now, members,
                                                    host, period))
        failed, self.failed = self.failed, None
        idle = self.joining is None or not self.joining.is_alive()
        # a lower rank's fresh document: it leads the join (election.node_leader), and this one reads no more
        if idle and not lower_rank_arrivals(self.files.dd, self.cfg.job_id, wall_now - 3 * period, rank):
            local = self.files.read_arrivals(wall_now - 3 * period)
            written = {d["rank"]: d.get("written_at") for d in local}
            if written and _election.node_leader(written, wall_now, 3 * period) == rank:
                self.joining = threading.Thread(target=self._join, args=(local, wall_now, host),
                                                name="c10d-observer-join")
                self.joining.daemon = True
                self.joining.start()
        if failed is not None:
            raise failed

    def _join(self, local, wall_now, host):
        """The join (on ``joining``): this node's documents and those relayed from other nodes."""
        try:
            relayed = self.files.read_relayed_arrivals(wall_now - 3 * self.period)
            self.files.write_stragglers(join_node(self.stragglers, local, relayed, wall_now, host))
        except Exception as e:  # the loop says it
            self.failed = e


def lower_rank_arrivals(dd, job_id, since, rank):
    """Whether this node has an arrivals document of job ``job_id`` written since ``since`` (wall) by a rank
    below ``rank`` (one named by no rank read too): one such rank leads the node's join.  Read from the
    lowest rank up, until one is found, so a node's other watchdogs read one document each every period,
    where each read all of them (eight documents per watchdog every 2 s; 2.8 s of 31 s of scale.py's
    1,024-rank culprit run under cProfile, 2026-12-01)."""
    if not isinstance(rank, int):
        return False  # every document is read, as node_leader reads them
    named = [(_dumpdir.arrivals_rank(p), p) for p in dd.glob(_dumpdir.ARRIVALS_GLOB)]
    for r, path in sorted(named, key=lambda x: -1 if x[0] is None else x[0]):
        if r is not None and r >= rank:
            break
        doc = _dumpdir.read_json(path)
        if (isinstance(doc, dict) and isinstance(doc.get("rank"), int) and doc["rank"] < rank
                and doc.get("job_id") == job_id and (doc.get("written_at") or 0) >= since):
            return True
    return False


def read_arrivals(dd, job_id, since):
    """This node's ranks' arrivals documents of job ``job_id`` written since ``since`` (wall), in DumpDir ``dd``."""
    out = []
    for path in dd.glob(_dumpdir.ARRIVALS_GLOB):
        doc = _dumpdir.read_json(path)
        if (isinstance(doc, dict) and isinstance(doc.get("rank"), int) and doc.get("job_id") == job_id
                and (doc.get("written_at") or 0) >= since):
            out.append(doc)
    return out


def read_relayed_arrivals(dd, job_id, since):
    """The arrivals documents the relay brought (``arrivals-node-*.json``, dated by this node's clock when they
    came) since ``since`` (wall), each marked ``relayed``: the collecting node's only."""
    out = []
    for path in dd.glob(_dumpdir.ARRIVALS_NODE_GLOB):
        node = _dumpdir.read_json(path)
        if isinstance(node, dict) and node.get("job_id") == job_id and (node.get("written_at") or 0) >= since:
            out.extend(dict(d, relayed=True, streams={st: _arrivals.pairs_of(c) for st, c in (d.get("streams") or {}).items()})
                       for d in node.get("docs") or () if isinstance(d, dict) and isinstance(d.get("rank"), int))
    return out


def join_node(stragglers, local, relayed, wall_now, host):
    """The node leader's join (an arrivals.Stragglers, ``stragglers``) of its ranks' documents (``local``) and
    those the relay brought (``relayed``); returns the stragglers document.  A group across nodes (a member
    whose documents are not here) is joined from the relay's sample of every node's starts only, this node's
    too (relay_arrivals: the same seqs everywhere, brought by the collector's relay): its ranks' every start
    here would never complete, and would push the sample's calls out of what the join keeps."""
    here = {d["rank"] for d in local}
    whole = local  # each rank's timeline takes every stream (arrivals.Timelines: a call left out reads as none)
    local = [dict(d, streams={st: v for st, v in (d.get("streams") or {}).items()
                              if not _arrivals.spans((d.get("members") or {}).get(st), here)})
             for d in local]
    docs = local + relayed
    known = {}
    for d in docs:  # each group's members once (every document of its ranks holds them)
        for k, v in (d.get("members") or {}).items():
            if v and k not in known:
                known[k] = _arrivals.ranks_of(v)
    return stragglers.update(docs, known, wall_now, host, whole)
