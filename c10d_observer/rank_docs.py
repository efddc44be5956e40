"""The rank's documents, as its watchdog writes them: its position in every stream (from the channel), as a
report, a state or an end (documents.RankDoc), written through dumpdir; the ends of other ranks (whose calls
ended with them); the live view's document.  No torch."""
import os
import socket

from . import channel as _ch
from . import documents as _documents
from . import dumpdir as _dumpdir
from . import requests as _requests

HISTORY = 32  # calls kept per stream in a document (the verdict reads ops, sizes and the order of calls)


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
                _ch.ranks_tuple(ranks) if isinstance(ranks, list) else None, d.get("backend"), d.get("peer"), d.get("src"),
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
            phase = _documents.Phase(name, wall_now - (now_ns - since) / 1e9,
                                     wall_now + (until - now_ns) / 1e9 if until else None,
                                     round((until - since) / 1e9, 3) if until else None)
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
