"""What the watchdog does to the world: the rank's documents, its signals, its stacks, the gather's files,
the end of the rank.  watchdog.py decides (the Detector and the protocols, on a clock it is given); these
act, each on one thing, and never decide.  No torch.

- ``RankDocs``: the rank's position in every stream (from the channel), as a report, a state or an end
  (documents.RankDoc), written through dumpdir; the ends of other ranks (whose calls ended with them).
- ``Notifier``: the configured signal, to the rank, where the observer's handler is still the one in place.
- ``StackTaker``: the rank's stacks: a request to its helper thread, the dump signal, py-spy.
- ``GatherFiles``: the gather request, the answers, the merge into the verdict and its record.
- ``Ender``: on_timeout="abort": torchelastic's error file, SIGTERM, SIGKILL.
"""
import json
import os
import signal
import socket
import subprocess
import time

from . import election as _election
from . import stackfile as _stackfile
from . import arrivals as _arrivals
from . import channel as _ch
from . import config as _config
from . import documents as _documents
from . import dumpdir as _dumpdir
from . import requests as _requests
from . import verdict as _verdict
from .config import HANG_EXIT_CODE
from .levels import Level
from .text import rank_list, short_clock

HISTORY = 32  # calls kept per stream in a document (the verdict reads ops, sizes and the order of calls)
PY_SPY_EVERY_S = 60.0
PY_SPY_LIMIT_S = 30.0


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


class RankDocs(object):
    """The rank's documents: what its watchdog knows of it, typed, written to dump_dir."""

    def __init__(self, cfg, reader, dd, clock, wall, started_at, notifier, taker, stacks):
        self.cfg = cfg
        self.reader = reader
        self.dd = dd
        self.clock = clock
        self.wall = wall
        self.started_at = started_at
        self.notifier = notifier
        self.taker = taker  # StackTaker: where py-spy's dump is
        self.stacks = stacks  # the StackCollection protocol: the stacks file's size when last asked
        self.windows = cfg.windows
        self.last_report = None
        self.frozen_spans = []  # [{"since", "until"}]: when the rank's Python did not run (watch_frozen)

    def watch_frozen(self, now_ns, wall_now):
        """Every poll: note each span in which the rank's Python did not run (no beat of its helper thread for
        longer than ``frozen_after``: stopped, or a thread holding the GIL), with wall times.  A rank that
        resumes reads unfrozen in every later document; its spans, written in each, let a freeze found after
        the verdict still reach the record (outcome.py: "after").  True where the rank froze now."""
        beat = self.reader.heartbeat_ns()
        if not beat:
            return
        age = (now_ns - beat) / 1e9
        last = self.frozen_spans[-1] if self.frozen_spans else None
        if age > self.windows.frozen_after:
            if last is None or last["until"] is not None:
                self.frozen_spans.append({"since": round(wall_now - age, 3), "until": None})
                del self.frozen_spans[:-8]
                return True  # frozen now
        elif last is not None and last["until"] is None:
            last["until"] = round(wall_now - age, 3)  # its first beat since
        return False

    def rank(self):
        return self.reader.rank()[0]

    def name(self, fmt):
        return fmt(self.rank(), self.cfg.rank_pid)

    def positions(self, snap, now_ns, wall_now):
        out = []
        exact = None  # the arrivals streams, by name: read only where a stream's own ring has no history
        for st in snap:
            d = st.desc
            recent = []
            for seq in range(max(1, st.last_started - HISTORY + 1), st.last_started + 1):
                a, op, t, b, _ = self.reader.slot(st.idx, seq)
                if a == b == seq:
                    name, api = _ch.decode_op(op)
                    recent.append(_documents.Call(seq, name, _ch.decode_sig(op), wall_now - (now_ns - t) / 1e9, api))
            if len(recent) < min(HISTORY, st.last_started) or any(c.op == "unknown" for c in recent):
                # a recorder source writes a group's calls as counters (op unknown until a lookup names them)
                # and puts their exact starts and ops on the group's arrivals stream once it read them: the
                # history the ordering rule needs (every gap filled: a 3D job on 2.15 kept 17 of 32 calls where
                # only half missing was filled; every unknown op too: on 2.13 one at the skip's place left a
                # TP skip "cannot decide")
                if exact is None:
                    exact = {str(a.desc.get("stream")): a for a in self.reader.snapshot(arrivals=True)}
                recent = self._from_arrivals(exact.get(str(d.get("stream"))), st, recent, now_ns, wall_now)
            fly = None
            if st.oldest:
                seq, op, t = st.oldest
                name, api = _ch.decode_op(op)
                fly = _documents.Call(seq, name, _ch.decode_sig(op), wall_now - (now_ns - t) / 1e9, api)
            ranks = d.get("ranks")
            out.append(_documents.Position(
                str(d.get("stream")), str(d.get("group")), d.get("kind") or "collective",
                tuple(ranks) if isinstance(ranks, list) else None, d.get("backend"), d.get("peer"), d.get("src"),
                d.get("dst"), d.get("torch_timeout_s"), st.last_started, st.last_completed, fly, tuple(recent),
                st.overflow))
        return tuple(out)

    def _from_arrivals(self, arr, st, recent, now_ns, wall_now):
        if arr is None:
            return recent
        have = {c.seq: c for c in recent}
        for seq in range(max(1, st.last_started - HISTORY + 1), min(st.last_started, arr.last_started) + 1):
            if seq in have and have[seq].op != "unknown":
                continue
            a, op, t, b, _ = self.reader.slot(arr.idx, seq)
            if a == b == seq:
                name, api = _ch.decode_op(op)
                if name != "unknown" or seq not in have:
                    have[seq] = _documents.Call(seq, name, _ch.decode_sig(op), wall_now - (now_ns - t) / 1e9, api)
        return sorted(have.values(), key=lambda c: c.seq)

    def document(self, kind, entries, snap=None, now_ns=None, **fields):
        """A RankDoc of this rank now: who, where in every group, and how alive."""
        rank, world = self.reader.rank()
        now_ns = self.clock() if now_ns is None else now_ns
        wall_now = self.wall()
        snap = self.reader.snapshot() if snap is None else snap
        beat = self.reader.heartbeat_ns()
        age = (now_ns - beat) / 1e9 if beat else None
        c = self.cfg
        phase = None
        ph = self.reader.phase()
        if ph is not None:  # the phase the rank declared (c10d_observer.phase)
            name, since, until = ph
            phase = {"name": name, "since": wall_now - (now_ns - since) / 1e9,
                     "until": wall_now + (until - now_ns) / 1e9 if until else None,
                     "up_to_s": round((until - since) / 1e9, 3) if until else None}
        doc = _documents.RankDoc(
            kind, rank, world, c.host or socket.gethostname(), c.rank_pid, c.job_id, wall_now, self.started_at,
            True, None, bool(beat) and age > self.windows.frozen_after, None if age is None else round(age, 3),
            self.reader.main_thread(), self.dd.path(os.path.basename(c.stack_path)), None, self.taker.py_spy_path(),
            None, self.stacks.size_before if self.stacks.asked_ns is not None else None,
            self.positions(snap, now_ns, wall_now), tuple(entries),
            self._fr_entries(rank), c.public_config, self.notifier.handler_state(), phase=phase,
            scheduler=c.scheduler)
        if self.frozen_spans:
            extra = dict(fields.pop("extra", None) or {})
            extra["frozen_spans"] = [dict(span) for span in self.frozen_spans]
            fields["extra"] = extra
        return doc._replace(**fields) if fields else doc

    def report(self, entries, snap, now_ns, deadlines=None):
        c = self.cfg
        doc = self.document("report", entries, snap, now_ns, extra={
            "deadlines": deadlines,
            "watchdog_pid": os.getpid(), "torch_version": c.torch_version, "source": c.source_in_use,
            "source_reasons": c.source_reasons, "source_plan": c.source_plan, "source_rejected": c.source_rejected,
            "untracked_streams": self.reader.dropped_streams(), "signal": c.signal_name,
            "on_timeout": c.on_timeout, "watchdog_restarts": c.restarts})
        self.last_report = self.dd.write_json(self.name(_dumpdir.report_name), doc.to_json())
        return self.last_report

    def state(self, entries, gather_id):
        """state-rank<R>-pid<P>.json: this rank's position in every group, answering gather ``gather_id``."""
        return self.dd.write_json(self.name(_dumpdir.state_name),
                                  self.document("state", entries, gather_id=gather_id).to_json())

    def live(self, entries, snap, now_ns):
        """live-rank<R>-pid<P>.json: this rank's positions now, while ``c10d-observer watch`` is open."""
        return self.dd.write_json(self.name(_dumpdir.live_name),
                                  self.document("live", entries, snap, now_ns).to_json())

    def watched(self, wall_now):
        """A live view is open on dump_dir: its request (refreshed every second) is not past its ``until``."""
        return _requests.WatchRequest.is_open(self.dd, wall_now)

    def end(self, entries, alive, exit_reason):
        """end-rank<R>-pid<P>.json: the rank ended (disable(), or its process is gone).  A state the verdict
        was built from is never overwritten by it."""
        doc = self.document("end", entries, alive=alive, exit_reason=exit_reason)
        if not alive:
            doc = doc._replace(frozen=False)
        return self.dd.write_json(self.name(_dumpdir.end_name), doc.to_json())

    def reported(self):
        """The overdue calls a previous watchdog of this rank reported (a restart), as documents.Overdue."""
        doc = self.dd.read_json(self.name(_dumpdir.report_name))
        try:
            return _documents.RankDoc.from_json(doc).overdue if doc else ()
        except _documents.DocumentError:
            return ()

    def _fr_entries(self, rank):
        """The flight-recorder entries the rank converted to JSON (calls in flight and neighbours), if any."""
        doc = self.dd.read_json(_dumpdir.fr_name(rank, self.cfg.rank_pid))
        return doc.get("groups") if isinstance(doc, dict) else None

    def dead_peers(self, entry):
        """Ranks of ``entry``'s call whose process ended (their watchdogs' end documents) since it started."""
        out = []
        me = self.rank()
        for path in self.dd.glob(_dumpdir.END_GLOB):
            try:
                docs = _documents.load(path)
            except (_documents.DocumentError, OSError):
                continue
            for d in docs:
                if (d.dead and d.rank != me and d.rank in (entry.group_ranks or ()) and d.job_id == self.cfg.job_id
                        and (d.written_at or 0) >= (entry.started_at or 0)):
                    out.append(d.rank)
        return sorted(set(out))


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
        state = pid_state(self.cfg.rank_pid)
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
        """verdict.json (a Verdict), where it changed since the last look, else None."""
        key = self._key(_dumpdir.VERDICT_JSON)
        if key is None or key == self.verdict_key:
            return None
        self.verdict_key = key
        return self.verdict()

    def verdict(self):
        """verdict.json, the latest verdict merged on this node (a Verdict), or None."""
        return _verdict.read(self.dd.path(_dumpdir.VERDICT_JSON))

    def ask(self, gid, now_wall, level="hard"):
        rank, world = self.reader.rank()
        _requests.GatherRequest(id=gid, job_id=self.cfg.job_id, by_rank=rank, world_size=world,
                                requested_at=now_wall, level=level).write(self.dd)

    def scan(self, gather):
        """Count the answer files that changed since the last look (a merge across nodes looks at up to one
        file per rank every 50 ms) into the Gather protocol."""
        gid = gather.owned[0]
        for p in self.dd.glob(_dumpdir.STATE_GLOB) + self.dd.glob(_dumpdir.END_GLOB) + self.dd.glob(_dumpdir.NODE_GLOB):
            try:
                st = os.stat(p)
            except OSError:
                continue
            key = (st.st_mtime_ns, st.st_size)
            if gather.known(p, key):
                continue
            try:
                docs = _documents.load(p)
            except (_documents.DocumentError, OSError):
                docs = ()  # written atomically: never half a file; read again if it changes
            gather.count(p, key, [d for d in docs if d.job_id == self.cfg.job_id], gid)

    def write_arrivals(self, doc):
        self.dd.write_json(_dumpdir.arrivals_name(doc["rank"], doc["pid"]), doc)

    def read_arrivals(self, since):
        """This job's ranks' arrivals documents written since ``since`` (wall): this node's, and those another
        node's relay brought (``arrivals-node-*.json``, dated by this node's clock when they came)."""
        out = []
        for path in self.dd.glob(_dumpdir.ARRIVALS_GLOB):
            doc = _dumpdir.read_json(path)
            if (isinstance(doc, dict) and isinstance(doc.get("rank"), int) and doc.get("job_id") == self.cfg.job_id
                    and (doc.get("written_at") or 0) >= since):
                out.append(doc)
        for path in self.dd.glob(_dumpdir.ARRIVALS_NODE_GLOB):
            node = _dumpdir.read_json(path)
            if isinstance(node, dict) and node.get("job_id") == self.cfg.job_id and (node.get("written_at") or 0) >= since:
                out.extend(dict(d, relayed=True) for d in node.get("docs") or ()
                           if isinstance(d, dict) and isinstance(d.get("rank"), int))
        return out

    def write_stragglers(self, doc):
        self.dd.write_json(_dumpdir.STRAGGLERS, doc)

    @staticmethod
    def stacks_arrived(wanted):
        stack_dump, before = wanted
        return before is None or _dumpdir.size(stack_dump) > before

    def merge(self, gid, waited_s):
        """verdict.txt, verdict.json and the record, from every rank's answer to ``gid``; the summary line."""
        docs, _ = _verdict.load_docs(self.cfg.dump_dir, gather_id=gid)
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
    rank's (arrivals.Stragglers), written to stragglers.json."""

    def __init__(self, cfg, files, due_ns):
        self.cfg = cfg
        self.files = files
        self.period = cfg.timings.arrivals_period_s
        self.due_ns = due_ns
        self.log = _arrivals.ArrivalLog()
        self.stragglers = _arrivals.Stragglers()

    def observe(self, snap, now_ns, wall_now, arrivals_snap):
        """Note the starts the channel shows; whether the period's write is due."""
        self.log.observe(snap, now_ns, wall_now, arrivals_snap)
        if now_ns < self.due_ns:
            return False
        self.due_ns = now_ns + int(self.period * 1e9)
        return True

    def write(self, snap, rank, wall_now):
        members = {str(st.desc.get("stream")): st.desc.get("ranks") for st in snap
                   if isinstance(st.desc.get("ranks"), list)}
        # the last KEEP starts of each stream, every period: the leader joins the calls every member has
        host = self.cfg.host or socket.gethostname()
        period = self.period
        self.files.write_arrivals(self.log.document(rank, self.cfg.rank_pid, self.cfg.job_id, wall_now, members,
                                                    host, period))
        docs = self.files.read_arrivals(wall_now - 3 * period)
        local = {d["rank"]: d.get("written_at") for d in docs if not d.get("relayed")}  # this node's ranks
        if local and _election.node_leader(local, wall_now, 3 * period) == rank:
            known = {}
            for d in docs:
                known.update((k, v) for k, v in (d.get("members") or {}).items() if v)
            self.files.write_stragglers(self.stragglers.update(docs, known, wall_now, host))


class Ender(_Part):
    """on_timeout="abort": the rank's torchelastic error file, then SIGTERM, then SIGKILL."""

    def __init__(self, cfg, reader, dd, kill, log, wall):
        _Part.__init__(self, cfg, reader, dd, log, wall, kill)
        self.error_written = False  # this rank's error file holds the verdict
        self.armed = False

    def error_file(self, verdict, culprit):
        """What torchrun's summary shows for this rank: the culprit's says it is the culprit; a waiting
        rank's names the culprit; both name the verdict."""
        if not self.cfg.error_file or (self.error_written and verdict is None):
            return
        write_error_file(self.cfg.error_file, verdict, self.reader.rank()[0], culprit,
                         self.dd.path(_dumpdir.VERDICT_TEXT), self.wall(),
                         old_format=str(self.cfg.torch_version or "").startswith("1.9"))
        self.error_written = True

    def arm(self, culprit):
        """At the hard detection: from now on, the rank's end (a collective that raised once the culprit
        ended, under gloo) is with HANG_EXIT_CODE; again when the verdict comes (where this rank's own
        detection came late).  Once."""
        if self.armed:
            return
        self.armed = True
        try:
            _requests.ExitRequest.send(self.dd, self.cfg.rank_pid, _requests.ExitStage.ARM, self.wall(), culprit)
        except OSError:
            pass  # the exit request itself is written again; SIGTERM follows where it cannot be

    def disarm(self):
        """The verdict was held (a declared phase): the rank's end is its own again, until a hard one."""
        if not self.armed:
            return
        self.armed = False
        try:
            _requests.ExitRequest.send(self.dd, self.cfg.rank_pid, _requests.ExitStage.DISARM, self.wall())
        except OSError:
            self.log("rank %s: cannot disarm the rank's exit code %d: if it ends now, it ends with it"
                     % (self.reader.rank()[0], HANG_EXIT_CODE))

    def exit_request(self, culprit):
        """Ask the rank to end itself with HANG_EXIT_CODE (its helper thread reads the file within a poll):
        a launcher then tells a hang from a crash by the code; SIGTERM follows where it cannot."""
        rank = self.reader.rank()[0]
        self.log("rank %s: on_timeout=abort: asking rank pid %d to exit with code %d (a collective hang was "
                 "found%s; the verdict is in %s)" % (rank, self.cfg.rank_pid, HANG_EXIT_CODE,
                                                     ", this rank is its culprit" if culprit else "", self.cfg.dump_dir))
        try:
            _requests.ExitRequest.send(self.dd, self.cfg.rank_pid, _requests.ExitStage.NOW, self.wall(), culprit)
        except OSError as e:
            self.log("rank %s: cannot ask the rank to exit (%s): SIGTERM follows" % (rank, e))

    def term(self):
        self.log("rank %s: on_timeout=abort: rank pid %d did not exit within %g s (a thread holds the GIL?): "
                 "sending SIGTERM" % (self.reader.rank()[0], self.cfg.rank_pid, self.cfg.windows.abort_exit))
        self.kill(self.cfg.rank_pid, signal.SIGTERM)

    def kill_now(self):
        self.log("rank %s: rank pid %d still alive %g s after SIGTERM: sending SIGKILL"
                 % (self.reader.rank()[0], self.cfg.rank_pid, self.cfg.windows.abort_kill_after))
        self.kill(self.cfg.rank_pid, signal.SIGKILL)

    def culprits_ended(self, v):
        """The verdict's culprits on this host are gone (their pids), or it names none here."""
        host = self.cfg.host or socket.gethostname()
        for r in v.culprit_ranks or ():
            h = (v.hosts or {}).get(str(r)) or {}
            if h.get("host") in (None, host) and h.get("pid") and pid_alive(h["pid"]):
                return False
        return True


def write_error_file(path, verdict, rank, culprit, verdict_path, wall_now, old_format=False):
    """torchelastic's error file, in the format its ``ErrorHandler`` writes, atomically (a partial file
    crashes torchrun's summary): torchrun prints its text for this rank, and names the failure with the
    smallest ``timestamp`` (whole seconds) its Root Cause.  The culprit's is dated when the stuck call
    began; the others' a second later at least.  torch 1.9 prints the dict form as a repr: the string form
    there (``old_format``)."""
    v = verdict
    summary = (v.summary if v is not None else None) or "no verdict was merged"
    if summary.startswith("c10d_observer: "):
        summary = summary[len("c10d_observer: "):]
    began = min([h.started_at for h in (v.hangs if v is not None else ()) if h.started_at] or [wall_now])
    if culprit:
        head = "c10d_observer: collective hang: rank %s (this rank) is its culprit; ended by on_timeout=abort" % rank
        stamp = int(began)
    else:
        head = "c10d_observer: collective hang: rank %s (this rank) was ended by on_timeout=abort; culprit: %s" % (
            rank, rank_list(v.culprit_ranks if v is not None else None, "unknown"))
        stamp = max(int(wall_now), int(began) + 1)
    message = "%s. %s (verdict: %s)" % (head, summary, verdict_path)
    if old_format:
        doc = {"message": "%s\n%s" % (message, _read(verdict_path)), "timestamp": stamp}
    else:
        doc = {"message": {"message": message, "extraInfo": {
            "py_callstack": "%s\n\n%s" % (message, _read(verdict_path)), "timestamp": str(stamp)}}}
    _dumpdir.write_text(path, json.dumps(doc))


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def pid_state(pid):
    """The process's state letter in /proc (R, S, D, T stopped, t traced, Z...), or None where unreadable."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def exit_status(pid, proc="/proc", wait_s=0.0, clock=time.monotonic, sleep=time.sleep):
    """How a process that ended is ending, in words ("killed by signal 6 (SIGABRT)", "exit code 1"), read from
    its /proc entry while it is a zombie not yet reaped by its parent (field 52, Linux 3.5+); None where it is
    not a zombie or the entry is gone (reaped: a launcher reaps within its monitor interval).  ``wait_s``: how
    long to wait for it to become one: a process closes its files (the watchdog's lifeline) before it is a
    zombie, and one that dumps core on SIGABRT takes a while (no event tells a non-parent: pidfd_open is not in
    Python 3.8; polled every 10 ms)."""
    end = clock() + wait_s
    while True:
        state = pid_state(pid) if proc == "/proc" else None
        if state is None or state in ("Z", "X") or clock() >= end:
            break
        sleep(0.01)
    try:
        with open("%s/%d/stat" % (proc, pid)) as f:
            rest = f.read().rsplit(")", 1)[1].split()
        if rest[0] != "Z" or len(rest) < 50:
            return None
        status = int(rest[49])
    except (OSError, IndexError, ValueError):
        return None
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = "signal %d" % sig
        return "killed by signal %d (%s)" % (sig, name)
    return "exit code %d" % os.WEXITSTATUS(status)


def pid_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False
