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
import json
import os
import select
import signal
import socket
import sys
import time
from collections import namedtuple

from . import channel as _ch
from . import report as _report

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

    def tick(self, now_ns):
        """One poll: report and signal what became overdue.  Returns the new Overdue items."""
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
        sent = self.send_signal()  # even when the report failed: the stack dump matters most
        for o in new:
            self.log("rank %s: %s in flight for %.1f s (timeout %g s)%s; report %s; stacks %s"
                     % (self._rank(), _report.describe_call(self._record(o, now_ns, wall_now)),
                        (now_ns - o.start_ns) / 1e9, self.cfg["timeout"],
                        "" if sent else " (signal could not be sent)", path, self.cfg["stack_path"]))
        if self.cfg.get("on_timeout") == "abort" and not self.aborting:
            self.aborting = True
            self.abort()
        return new

    def _update_report(self, snap, overdue, wall_now):
        in_flight = {(o.stream.idx, o.seq) for o in overdue}
        for r in self.records:
            r["in_flight"] = (r["_idx"], r["seq"]) in in_flight
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
                "seq": o.seq, "op": op, "api": api, "started_at": wall_now - age, "detected_at": wall_now,
                "age_s": round(age, 3), "in_flight": True, "_idx": o.stream.idx}

    def write_report(self, snap, wall_now):
        rank, world = self.reader.rank()
        cfg = self.cfg
        groups = []
        for st in snap:
            d = st.desc
            groups.append({"group": d.get("group"), "stream": d.get("stream"), "kind": d.get("kind"),
                           "ranks": d.get("ranks"), "backend": d.get("backend"), "peer": d.get("peer"),
                           "last_started": st.last_started, "last_completed": st.last_completed,
                           "in_flight_seq": st.oldest[0] if st.oldest else None,
                           "ring_overflow": st.overflow})
        rep = {"format": _report.FORMAT, "version": _report.VERSION, "rank": rank, "world_size": world,
               "host": cfg.get("host") or socket.gethostname(), "pid": self.rank_pid,
               "watchdog_pid": os.getpid(), "torch_version": cfg.get("torch_version"),
               "source": cfg.get("source_in_use"), "source_reasons": cfg.get("source_reasons"),
               "source_plan": cfg.get("source_plan"), "source_rejected": cfg.get("source_rejected"),
               "flight_recorder": self._fr_entries(rank),
               "config": cfg.get("public_config"), "written_at": wall_now,
               "overdue": [{k: v for k, v in r.items() if k != "_idx"} for r in self.records],
               "groups": groups, "untracked_streams": self.reader.dropped_streams(),
               "stack_dump": cfg["stack_path"], "signal": cfg.get("signal_name"),
               "on_timeout": cfg.get("on_timeout")}
        path = os.path.join(cfg["dump_dir"], _report.report_name(rank, self.rank_pid))
        _report.write_atomic(path, rep)
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

    def send_signal(self):
        try:
            self.kill(self.rank_pid, self.cfg["signal"])
            return True
        except OSError as e:
            self.log("could not signal rank pid %d: %s" % (self.rank_pid, e))
            return False

    def abort(self):
        """on_timeout="abort": let the stack dump finish, then end the rank so the launcher restarts it."""
        path = self.cfg["stack_path"]
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
            try:
                readable, _, _ = select.select([lifeline_fd], [], [], wait)
            except InterruptedError:
                readable = []
            if readable:  # "stop" from disable(), or EOF: the rank exited or died
                return "stop" if os.read(lifeline_fd, 4096) else "the rank closed its end"
            if os.getppid() != self.rank_pid:
                return "the rank (pid %d) is gone" % self.rank_pid
            now = self.clock()
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
    if os.environ.get("C10D_OBSERVER_DEBUG"):
        _log("exiting: %s" % reason)
    reader.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
