"""The watchdog subprocess: one per rank.  It never imports torch.

``find_overdue(snapshot, now_ns, timeout_ns)`` is the decision: a pure function of the channel contents
and the time.  ``Watchdog.tick(now_ns)`` acts on it (report, then signal, once per (stream, seq)).
``Watchdog.run()`` only sleeps, watches its rank and calls ``tick``.

Started as ``python -m c10d_observer.watchdog``: the config arrives as one JSON line on stdin, and
stdin then stays open as the rank's lifeline: a "stop" line (disable) or EOF (the rank exited or died)
ends the watchdog.  Processes the rank forked (DataLoader workers) may hold the pipe open after the rank
is gone, so each poll also checks that the rank is still the watchdog's parent.  Readiness is the line
``READY <pid>`` on stdout.
"""
import glob
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections import namedtuple

from . import channel as _ch
from . import report as _report
from . import verdict as _verdict

GATHER_NAME = _verdict.GATHER_NAME
PY_SPY_EVERY_S = 60.0

Overdue = namedtuple("Overdue", "stream seq op start_ns")


def find_overdue(snapshot, now_ns, timeout_ns):
    """The (stream, seq) whose oldest call in flight has been so for longer than ``timeout_ns``.

    Only a stream's oldest call in flight can be the first overdue one: later calls started later.
    """
    out = []
    for st in snapshot:
        if st.oldest is None:
            continue
        seq, op, start = st.oldest
        if now_ns - start > timeout_ns:
            out.append(Overdue(st, seq, op, start))
    return out


def _log(msg):
    try:
        sys.stderr.write("c10d_observer[watchdog]: %s\n" % msg)
        sys.stderr.flush()
    except Exception:
        pass


class Watchdog(object):
    def __init__(self, cfg, reader, clock=time.monotonic_ns, wall=time.time, kill=os.kill, log=_log):
        self.cfg = cfg
        self.reader = reader
        self.timeout_ns = int(cfg["timeout"] * 1e9)
        self.rank_pid = cfg["rank_pid"]
        self.clock = clock
        self.wall = wall
        self.kill = kill
        self.log = log
        self.fired = set()
        self.records = []
        self.last_report = None
        self.report_failed = False
        self.aborting = False
        self.started_at = wall()
        poll = cfg["poll_interval"]
        # every watchdog on one node answers within one poll; across nodes the observer sets a longer one
        self.gather_wait = cfg.get("gather_wait") or max(2.0, 2.5 * poll + 0.5)
        # past gather_wait, a merge missing answers waits on while they still arrive (a large job's nodes
        # answer over several relay periods), until none came for gather_quiet, at most gather_wait_max
        self.gather_wait_max = max(cfg.get("gather_wait_max") or 2 * self.gather_wait, self.gather_wait)
        self.gather_quiet_ns = int(max(1.0, 2 * poll) * 1e9)
        self._answers = {}  # state file -> ((mtime_ns, size), rank, answered): the merge's scan, kept
        self._answered_n = 0  # ranks answered at the last scan
        self._progress_ns = None  # when that number last grew
        self.frozen_after_ns = int((3 * poll + 1.0) * 1e9)  # the rank's helper beats once a poll
        self.answer_wait_ns = int((2 * poll + 0.5) * 1e9)  # for the helper to answer a stacks request
        self.pending_request = None  # (asked_ns, stacks size before, reason) of an unanswered request
        self.gather_seen = None  # (mtime_ns, size) of the request file last looked at
        self.gather_answered = None  # id of the last request answered
        self.gather_owned = None  # (id, requested_at) of the request this watchdog made and will merge
        self.signalled_at = None
        self.stacks_size_before = None  # size of the rank's stacks file when it was last signalled
        self.py_spy = cfg.get("py_spy")  # its path where installed: native + Python stacks, taken from outside
        self.py_spy_proc = None
        self.py_spy_started = None
        self.withheld_by = None  # the handler that replaced the observer's, last time a signal was withheld

    def tick(self, now_ns):
        """One poll: report and signal what became overdue.  Returns the new Overdue items."""
        self.reap_py_spy()
        try:
            self.check_request(now_ns)
        except Exception as e:
            self.log("stacks request check failed: %r" % (e,))
        try:
            self.check_gather(now_ns)
        except Exception as e:  # the gather is a bonus: never let it stop detection
            self.log("gather failed: %r" % (e,))
        snap = self.reader.snapshot()
        overdue = find_overdue(snap, now_ns, self.timeout_ns)
        new = [o for o in overdue if (o.stream.idx, o.seq) not in self.fired]
        if not new:
            keys = {(o.stream.idx, o.seq) for o in overdue}
            ended = any(r["in_flight"] and (r["_idx"], r["seq"]) not in keys for r in self.records)
            if ended or self.report_failed:  # a reported call completed later, or a write to retry
                self._update_report(snap, overdue, self.wall())
            return new
        wall_now = self.wall()
        for o in new:
            self.fired.add((o.stream.idx, o.seq))
            self.records.append(self._record(o, now_ns, wall_now))
        path = self._update_report(snap, overdue, wall_now)
        sent = self.send_signal(reason="%s in flight for %.1f s (timeout %g s)" % (
            _report.describe_call(self._record(new[0], now_ns, wall_now)), (now_ns - new[0].start_ns) / 1e9,
            self.cfg["timeout"]))  # even when the report failed: the stack dump matters most
        try:
            self.request_gather(now_ns, wall_now)
        except Exception as e:
            self.log("could not request the other ranks' state: %r" % (e,))
        for o in new:
            self.log("rank %s: %s in flight for %.1f s (timeout %g s)%s; report %s; stacks %s"
                     % (self._rank(), _report.describe_call(self._record(o, now_ns, wall_now)),
                        (now_ns - o.start_ns) / 1e9, self.cfg["timeout"],
                        "" if sent else " (no %s sent: its handler was replaced by %s)" % (
                            self.cfg.get("signal_name"), self.withheld_by) if self.withheld_by else
                        " (signal could not be sent)", path, self.cfg["stack_path"]))
        if self.cfg.get("on_timeout") == "abort" and not self.aborting:
            self.aborting = True
            self.await_verdict()  # the verdict is merged and written before any rank is ended
            self.abort()
        return new

    def await_verdict(self):
        """Before ending the rank (on_timeout="abort"): let the gather this watchdog asked for or joined be
        merged into verdict.json (at most the gather window and a second)."""
        gid = self.gather_answered
        deadline = time.monotonic() + self.gather_wait + 1.0
        while time.monotonic() < deadline:
            if self.gather_owned is not None:
                try:
                    self.check_gather(self.clock())
                except Exception as e:
                    self.gather_owned = None
                    self.log("merging the verdict failed: %r" % (e,))
            if self.gather_owned is None:
                merged = _report.read_json(os.path.join(self.cfg["dump_dir"], _verdict.VERDICT_JSON))
                if gid is None or (merged or {}).get("gather_id") == gid:
                    return True
            time.sleep(0.05)
        self.log("on_timeout=abort: no verdict within %.1f s; ending the rank anyway" % (self.gather_wait + 1.0))
        return False

    def _update_report(self, snap, overdue, wall_now):
        in_flight = {(o.stream.idx, o.seq) for o in overdue}
        for r in self.records:
            was = r["in_flight"]
            r["in_flight"] = (r["_idx"], r["seq"]) in in_flight
            if was and not r["in_flight"]:  # an overdue call completed: the hang resolved (seen within a poll)
                r["resolved"] = True
                r["completed_at"] = wall_now
                r["resolved_after_s"] = round(wall_now - r["started_at"], 1)
                self.log("rank %s: %s completed after %.1f s in flight (it was overdue): resolved"
                         % (self._rank(), _report.describe_call(r), r["resolved_after_s"]))
        try:
            path = self.write_report(snap, wall_now)
        except Exception as e:
            self.report_failed = True
            self.log("could not write the report (will retry): %r" % (e,))
            return None
        self.report_failed = False
        return path

    def _rank(self):
        return self.reader.rank()[0]

    def _record(self, o, now_ns, wall_now):
        desc = o.stream.desc
        op, api = _ch.decode_op(o.op)
        age = (now_ns - o.start_ns) / 1e9
        return {"group": desc.get("group"), "stream": desc.get("stream"), "group_ranks": desc.get("ranks"),
                "backend": desc.get("backend"), "kind": desc.get("kind"), "peer": desc.get("peer"),
                "seq": o.seq, "op": op, "api": api, "size": _ch.decode_sig(o.op),
                "started_at": wall_now - age, "detected_at": wall_now,
                "age_s": round(age, 3), "in_flight": True, "resolved": False, "_idx": o.stream.idx}

    def _in_flight_text(self, snap, now_ns):
        """'; <call> in flight for N s' for this rank's oldest call in flight, or '' (for a dump's header)."""
        flying = find_overdue(snap, now_ns, -1)
        if not flying:
            return ""
        o = min(flying, key=lambda o: o.start_ns)
        return "; %s in flight for %.1f s" % (_report.describe_call(self._record(o, now_ns, self.wall())),
                                              (now_ns - o.start_ns) / 1e9)

    def finish(self):
        """At disable() (the rank stopped the observer): bring the report up to date (calls that completed
        since the last poll), and leave this rank's final state, so that ``report`` on a job that ran
        without a hang finds every rank's state and says so (exit 0) rather than finding nothing."""
        now_ns, wall_now = self.clock(), self.wall()
        snap = self.reader.snapshot()
        if self.records:
            self._update_report(snap, find_overdue(snap, now_ns, self.timeout_ns), wall_now)
        self.write_state(wall_now, exit_reason="the observer was disabled")

    def _document(self, snap, wall_now, now_ns=None):
        """What a report and a state file share: who, where in every group, and how alive."""
        rank, world = self.reader.rank()
        now_ns = self.clock() if now_ns is None else now_ns
        groups = []
        for st in snap:
            d = st.desc
            g = {"group": d.get("group"), "stream": d.get("stream"), "kind": d.get("kind"),
                 "ranks": d.get("ranks"), "backend": d.get("backend"), "peer": d.get("peer"),
                 "src": d.get("src"), "dst": d.get("dst"), "torch_timeout_s": d.get("torch_timeout_s"),
                 "last_started": st.last_started, "last_completed": st.last_completed,
                 "in_flight_seq": st.oldest[0] if st.oldest else None, "ring_overflow": st.overflow}
            recent = []  # the last few calls' ops: a rank that finished a different op is a desync
            for seq in range(max(1, st.last_started - 7), st.last_started + 1):
                a, op, _, b, _ = self.reader.slot(st.idx, seq)
                if a == b == seq:
                    recent.append([seq, _ch.decode_op(op)[0], _ch.decode_sig(op)])
            g["recent_ops"] = recent
            if st.oldest:
                g["in_flight_op"], g["in_flight_api"] = _ch.decode_op(st.oldest[1])
                g["in_flight_size"] = _ch.decode_sig(st.oldest[1])
                g["in_flight_since"] = wall_now - (now_ns - st.oldest[2]) / 1e9
            groups.append(g)
        beat = self.reader.heartbeat_ns()
        age = (now_ns - beat) / 1e9 if beat else None
        return {"format": _report.FORMAT, "version": _report.VERSION, "rank": rank, "world_size": world,
                "host": self.cfg.get("host") or socket.gethostname(), "pid": self.rank_pid,
                "job_id": self.cfg.get("job_id", ""), "watchdog_started_at": self.started_at,
                "written_at": wall_now, "groups": groups, "alive": True,
                "heartbeat_age_s": None if age is None else round(age, 3),
                "frozen": bool(beat) and now_ns - beat > self.frozen_after_ns,
                "main_thread": self.reader.main_thread(), "stack_dump": self.cfg["stack_path"],
                "py_spy_dump": os.path.join(self.cfg["dump_dir"], _report.py_spy_name(rank, self.rank_pid))
                if self.py_spy and self.py_spy_started is not None else None,
                "config": self.cfg.get("public_config"),
                "signal_handler": self._handler_state()}

    def _handler_state(self):
        by = self.replaced_by()
        return {"signal": self.cfg.get("signal_name"), "ours": by is None, "replaced_by": by,
                "signal_withheld": self.withheld_by is not None}

    def write_state(self, wall_now, gather_id=None, alive=True, exit_reason=None):
        """state-rank<R>-pid<P>.json: this rank's position in every group, for the cross-rank verdict."""
        doc = self._document(self.reader.snapshot(), wall_now)
        doc.update(kind="state", gather_id=gather_id, alive=alive, exit_reason=exit_reason,
                   flight_recorder=self._fr_entries(doc["rank"]),
                   stacks_size_before=self.stacks_size_before if self.signalled_at is not None else None,
                   overdue=[{k: v for k, v in r.items() if k != "_idx"} for r in self.records])
        if not alive:
            doc["frozen"] = False
        path = os.path.join(self.cfg["dump_dir"], _verdict.state_name(doc["rank"], self.rank_pid))
        _report.write_atomic(path, _report.compact_ranks(doc))
        return path

    # -- the cross-rank gather (one node: through dump_dir) ---------------------------------------------
    def request_gather(self, now_ns, wall_now):
        """Ask every watchdog sharing dump_dir for its rank's state; this one merges them into the verdict.

        A request of the same job made within the gather window and not merged yet is joined instead
        (answered again if this watchdog answered it already: its state now names the new overdue call).
        """
        path = os.path.join(self.cfg["dump_dir"], GATHER_NAME)
        req = _report.read_json(path)
        if (req and req.get("job_id") == self.cfg.get("job_id", "") and not req.get("merged_at")
                and wall_now - (req.get("requested_at") or 0) < self.gather_wait):
            if req.get("id") == self.gather_answered:
                self.write_state(wall_now, gather_id=req["id"])
            else:
                self.check_gather(now_ns, force=True)
            return
        rank, world = self.reader.rank()
        gid = "%s-%d-%d" % (self.cfg.get("host") or socket.gethostname(), os.getpid(), now_ns)
        _report.write_atomic(path, {"id": gid, "job_id": self.cfg.get("job_id", ""), "by_rank": rank,
                                    "world_size": world, "requested_at": wall_now})
        self.gather_owned = (gid, wall_now, now_ns)
        self.gather_answered = gid
        self.write_state(wall_now, gather_id=gid)

    def check_gather(self, now_ns, force=False):
        """Answer a new gather request; merge the one this watchdog owns when complete or due."""
        path = os.path.join(self.cfg["dump_dir"], GATHER_NAME)
        try:
            st = os.stat(path)
            key = (st.st_mtime_ns, st.st_size)
        except OSError:
            key = None
        if key is not None and (key != self.gather_seen or force):
            self.gather_seen = key
            req = _report.read_json(path)
            if req and self.gather_owned is not None and req.get("supersedes") == self.gather_owned[0]:
                self.gather_owned = None  # another node's request came first: its node merges (relay.py)
            if (req and req.get("id") != self.gather_answered and req.get("job_id") == self.cfg.get("job_id", "")
                    and (req.get("requested_at") or 0) >= self.started_at - self.gather_wait):
                self.gather_answered = req["id"]
                if ((self.helper_alive(now_ns) or not self.cfg.get("signal_chains_user_handler")) and (
                        self.signalled_at is None or now_ns - self.signalled_at > self.gather_wait * 1e9)):
                    # the stacks of every rank, not only the waiting ones; py-spy only of a rank in no
                    # collective (a suspect: where is it?), not of one that waits, to not stop it for nothing
                    snap = self.reader.snapshot()
                    self.send_signal(py_spy=not any(st.oldest for st in snap),
                                     reason="the verdict's gather %s, asked by rank %s%s" % (
                                         req["id"], req.get("by_rank"), self._in_flight_text(snap, now_ns)))
                self.write_state(self.wall(), gather_id=req["id"])
        if self.gather_owned is not None:
            gid, requested_at, asked_ns = self.gather_owned
            waited = now_ns - asked_ns
            if self._gather_complete(gid, now_ns) or waited > self.gather_wait_max * 1e9 or (
                    waited > self.gather_wait * 1e9 and now_ns - self._progress_ns > self.gather_quiet_ns):
                self.gather_owned = None
                self.merge(gid, waited)

    def _gather_complete(self, gid, now_ns):
        """Every rank answered ``gid`` (or ended).  Reads only the state files that changed since the last
        call (a merge across nodes looks at up to one file per rank every 50 ms); notes when answers last
        grew in number, for the quiet rule in check_gather."""
        if self._progress_ns is None or self._answers.get(None) != gid:
            self._answers, self._answered_n, self._progress_ns = {None: gid}, 0, now_ns
        world = self.reader.rank()[1]
        d = self.cfg["dump_dir"]
        for p in glob.glob(os.path.join(d, _verdict.STATE_GLOB)) + glob.glob(os.path.join(d, _verdict.NODE_GLOB)):
            try:
                st = os.stat(p)
            except OSError:
                continue
            key = (st.st_mtime_ns, st.st_size)
            seen = self._answers.get(p)
            if seen is not None and seen[0] == key:
                continue
            try:
                docs = _verdict.state_docs(p)
            except (_report.ReportError, OSError):
                docs = ()  # not a state (written atomically: never half a file); read again if it changes
            entries = []
            for doc in docs:
                dead = doc.get("alive") is False
                # what stacks_arrived reads: the stacks file grows without the state file changing
                stacks = None if dead else {k: doc.get(k) for k in ("stacks_size_before", "frozen", "stack_dump")}
                entries.append((doc.get("rank"), dead or doc.get("gather_id") == gid, stacks))
            self._answers[p] = (key, entries)
        have = {rank for k, v in self._answers.items() if k is not None for rank, answered, stacks in v[1]
                if answered and (stacks is None or _verdict.stacks_arrived(stacks))}
        if len(have) > self._answered_n:
            self._answered_n, self._progress_ns = len(have), now_ns
        return world > 0 and have >= set(range(world))

    def merge(self, gid, waited_ns):
        """Write verdict.json / verdict.txt into dump_dir and print its one-line summary."""
        docs, _ = _verdict.load_docs(self.cfg["dump_dir"])
        v = _verdict.analyze(docs, world_size=self.reader.rank()[1] or None)
        v["gather_id"] = gid
        v["gather_s"] = round(waited_ns / 1e9, 3)
        v["verdict_at"] = self.wall()
        _verdict.write(self.cfg["dump_dir"], v)
        path = os.path.join(self.cfg["dump_dir"], GATHER_NAME)
        req = _report.read_json(path)
        if req and req.get("id") == gid:  # a later detection starts a new gather rather than join this one
            req["merged_at"] = v["verdict_at"]
            _report.write_atomic(path, req)
        self.log("%s (verdict: %s)" % (v["summary"][len("c10d_observer: "):],
                                       os.path.join(self.cfg["dump_dir"], _verdict.VERDICT_TEXT)))
        return v

    def write_report(self, snap, wall_now):
        rank, world = self.reader.rank()
        cfg = self.cfg
        rep = self._document(snap, wall_now)
        rep.update({"kind": "report", "watchdog_pid": os.getpid(), "torch_version": cfg.get("torch_version"),
                    "source": cfg.get("source_in_use"), "source_reasons": cfg.get("source_reasons"),
                    "source_plan": cfg.get("source_plan"), "source_rejected": cfg.get("source_rejected"),
                    "flight_recorder": self._fr_entries(rank),
                    "overdue": [{k: v for k, v in r.items() if k != "_idx"} for r in self.records],
                    "untracked_streams": self.reader.dropped_streams(),
                    "signal": cfg.get("signal_name"), "on_timeout": cfg.get("on_timeout")})
        path = os.path.join(cfg["dump_dir"], _report.report_name(rank, self.rank_pid))
        _report.write_atomic(path, _report.compact_ranks(rep))
        self.last_report = path
        return path

    def _fr_entries(self, rank):
        """The flight-recorder entries the rank converted to JSON (calls in flight and neighbours), if any."""
        path = os.path.join(self.cfg["dump_dir"], _report.fr_name(rank, self.rank_pid))
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            return None
        return doc.get("groups") if isinstance(doc, dict) else None

    def dump_py_spy(self):
        """Start ``py-spy dump --native`` of the rank (it does not wait: the next polls reap it).

        py-spy stops the rank while it reads it (about 0.25 s): at most once per PY_SPY_EVERY_S."""
        if not self.py_spy or self.py_spy_proc is not None or (
                self.py_spy_started is not None and time.monotonic() - self.py_spy_started < PY_SPY_EVERY_S):
            return
        path = os.path.join(self.cfg["dump_dir"], _report.py_spy_name(self._rank(), self.rank_pid))
        try:
            with open(path, "w") as out:
                self.py_spy_proc = subprocess.Popen([self.py_spy, "dump", "--native", "--pid", str(self.rank_pid)],
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
            if not force and time.monotonic() - self.py_spy_started < 30.0:
                return
            p.kill()  # a stopped or unreadable rank: do not let it hang around
            p.wait()
        self.py_spy_proc = None

    def replaced_by(self):
        """None while the rank says its signal handler is the observer's; else what replaced it."""
        if not self.reader.handler_replaced():
            return None
        doc = _report.read_json(os.path.join(self.cfg["dump_dir"], _report.handler_name(self._rank(), self.rank_pid)))
        return (doc or {}).get("replaced_by") or "another handler (not named)"

    def helper_alive(self, now_ns=None):
        """The rank's helper thread beat within two polls: it can write the stacks itself, asked by a file."""
        beat = self.reader.heartbeat_ns()
        now_ns = self.clock() if now_ns is None else now_ns
        return bool(beat) and now_ns - beat < self.answer_wait_ns

    def send_signal(self, py_spy=True, reason=""):
        """Have the rank's stacks written: by its helper thread where it runs (a request file; it holds the
        GIL, so the dump is consistent and cannot crash the rank), else by the signal (faulthandler, from
        the signal handler: it works while a thread holds the GIL)."""
        if not self.helper_alive():
            return self._signal(py_spy, reason)
        path = self.cfg["stack_path"]
        try:
            before = os.path.getsize(path)
        except OSError:
            before = 0
        header = "stacks of rank %s (pid %d) at %s: %s" % (self._rank(), self.rank_pid,
                                                           _report._clock(self.wall()), reason or "asked")
        try:
            _report.write_atomic(os.path.join(self.cfg["dump_dir"], _report.stack_request_name(self.rank_pid)),
                                 {"header": header})
        except OSError as e:
            self.log("could not ask rank pid %d for its stacks (%s); signalling it" % (self.rank_pid, e))
            return self._signal(py_spy, reason)
        if py_spy:
            self.dump_py_spy()
        self._say_withheld("from the rank's helper thread%s" % (", py-spy" if self.py_spy else ""))
        self.stacks_size_before = before
        self.signalled_at = self.clock()
        self.pending_request = (self.signalled_at, before, reason)
        return True

    def check_request(self, now_ns):
        """A request the helper did not answer within two polls: the signal instead (a thread holds the GIL)."""
        p = self.pending_request
        if p is None:
            return
        asked, before, reason = p
        try:
            grown = os.path.getsize(self.cfg["stack_path"]) > before
        except OSError:
            grown = False
        if grown:
            self.pending_request = None
        elif now_ns - asked > self.answer_wait_ns:
            self.pending_request = None
            try:
                os.remove(os.path.join(self.cfg["dump_dir"], _report.stack_request_name(self.rank_pid)))
            except OSError:
                pass
            self._signal(False, "%s (its helper thread did not answer within %.1f s)" % (
                reason or "asked", self.answer_wait_ns / 1e9))

    def _say_withheld(self, stacks):
        """Once per handler: the job replaced the observer's signal handler after enable(), so the signal
        is never sent (it would run theirs); where the stacks come from instead, and how to have both."""
        by = self.replaced_by()
        if by is not None and by != self.withheld_by:
            self.withheld_by = by
            self.log("rank %s: no %s sent: its handler was replaced after enable() by %s (the signal would "
                     "run it); stacks: %s.  To have both, choose another signal: enable(signal=signal.SIGUSR2), "
                     "C10D_OBSERVER_SIGNAL=SIGUSR2 or run --signal SIGUSR2"
                     % (self._rank(), self.cfg.get("signal_name"), by, stacks))
        return by

    def _signal(self, py_spy=True, reason=""):
        # never run a handler that is not ours, nor chained by us
        if self._say_withheld("py-spy" if self.py_spy else "none (py-spy is not installed)") is not None:
            if py_spy:
                self.dump_py_spy()
            return False
        if py_spy:
            self.dump_py_spy()
        try:  # a header before the dump the signal makes: when, why, about which call
            with open(self.cfg["stack_path"], "a") as f:
                f.write("\n=== c10d_observer: stacks of rank %s (pid %d) at %s: %s ===\n" % (
                    self._rank(), self.rank_pid, _report._clock(self.wall()), reason or "asked"))
        except OSError:
            pass
        try:  # measured after the header: the dump has arrived once the file grows past this
            self.stacks_size_before = os.path.getsize(self.cfg["stack_path"])
        except OSError:
            self.stacks_size_before = 0
        try:
            self.kill(self.rank_pid, self.cfg["signal"])
            self.signalled_at = self.clock()
            return True
        except OSError as e:
            self.log("could not signal rank pid %d: %s" % (self.rank_pid, e))
            return False

    def abort(self):
        """on_timeout="abort": let the stack dump finish, then end the rank so the launcher restarts it."""
        path = self.cfg["stack_path"]
        deadline = time.monotonic() + self.answer_wait_ns / 1e9 + 0.5
        while self.pending_request is not None and time.monotonic() < deadline:  # the helper's answer first
            time.sleep(0.05)
            self.check_request(self.clock())
        if self.pending_request is not None:
            self.check_request(self.clock() + self.answer_wait_ns + 1)  # no answer: the signal now
        deadline = time.monotonic() + 5.0
        size = -1
        while time.monotonic() < deadline:  # the dump is done when the file stops growing
            time.sleep(0.2)
            try:
                now = os.path.getsize(path)
            except OSError:
                now = -1
            if now > 0 and now == size:
                break
            size = now
        self.log("on_timeout=abort: sending SIGTERM to rank pid %d" % self.rank_pid)
        try:
            self.kill(self.rank_pid, signal.SIGTERM)
        except OSError:
            return
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            if os.getppid() != self.rank_pid:
                return
            time.sleep(0.1)
        self.log("rank pid %d still alive 10 s after SIGTERM: sending SIGKILL" % self.rank_pid)
        try:
            self.kill(self.rank_pid, signal.SIGKILL)
        except OSError:
            pass

    def run(self, lifeline_fd):
        poll_ns = int(self.cfg["poll_interval"] * 1e9)
        next_tick = self.clock() + poll_ns
        while True:
            wait = max(0.0, (next_tick - self.clock()) / 1e9)
            if self.gather_owned is not None:  # merging soon: look at the answers more often
                wait = min(wait, 0.05)
            try:
                readable, _, _ = select.select([lifeline_fd], [], [], wait)
            except InterruptedError:
                readable = []
            if readable:  # "stop" from disable(), or EOF: the rank exited or died
                return "stop" if os.read(lifeline_fd, 4096) else "the rank closed its end"
            if os.getppid() != self.rank_pid:
                return "the rank (pid %d) is gone" % self.rank_pid
            now = self.clock()
            if self.gather_owned is not None and now < next_tick:
                try:
                    self.check_gather(now)
                except Exception as e:
                    self.gather_owned = None
                    self.log("merging the verdict failed: %r" % (e,))
            if now >= next_tick:
                next_tick = now + poll_ns
                try:
                    self.tick(now)
                except Exception as e:  # never die of our own bugs: log, try again next tick
                    self.log("tick failed (will retry): %r" % (e,))


def main():
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C on the job is the rank's business
    stdin_fd = sys.stdin.fileno()
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(stdin_fd, 65536)
        if not chunk:
            return 2
        line += chunk
    cfg = json.loads(line.decode("utf-8"))
    reader = _ch.ChannelReader(cfg["channel"])
    wd = Watchdog(cfg, reader)
    os.write(sys.stdout.fileno(), ("READY %d\n" % os.getpid()).encode())
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    reason = wd.run(stdin_fd)
    wd.reap_py_spy(force=True)
    if reason == "stop":
        try:
            wd.finish()
        except Exception as e:
            _log("could not write the rank's final state: %r" % (e,))
    else:  # the rank is gone without disable(): say so to the other ranks' verdicts
        try:
            wd.write_state(time.time(), alive=False, exit_reason="process %d ended without disable() (%s)"
                           % (wd.rank_pid, reason))
        except Exception as e:
            _log("could not record the rank's end: %r" % (e,))
    if os.environ.get("C10D_OBSERVER_DEBUG"):
        _log("exiting: %s" % reason)
    reader.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
