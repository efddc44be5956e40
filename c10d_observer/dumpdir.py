"""``dump_dir``: every file ranks and watchdogs write there, named once, written atomically.  No torch.

The directory is the second bus between a rank and its watchdog, and between the watchdogs of one node;
it is also what users read after the job.  This module owns it: each kind of file is named here and
nowhere else (``KINDS``), ``is_ours`` tells them from torch's own dumps, JSON is written to a temporary
name and renamed into place, and the stacks files' format (a header line per dump, then faulthandler's
lines) is written and parsed here.

Kinds of file (R: the rank, P: the rank's pid):

====================================  ================  ================================================
``report-rank<R>-pid<P>.json``        watchdog          the rank's overdue calls, its position everywhere
``state-rank<R>-pid<P>.json``         watchdog          its answer to the latest gather request
``end-rank<R>-pid<P>.json``           watchdog          the rank's end (disable() or death); a gathered
                                                        state is never overwritten by it
``states-node<N>.json``               relay             another node's states, one file per node
``stacks-rank<R>-pid<P>.txt``         rank              every thread's stack, one dump appended per ask
``pyspy-rank<R>-pid<P>.txt``          watchdog          py-spy's native and Python stacks
``fr-rank<R>-pid<P>.json``            rank              flight-recorder entries near the calls in flight
``stackreq-pid<P>.json``              watchdog -> rank  "write your stacks" (the helper thread answers)
``exitreq-pid<P>.json``               watchdog -> rank  on_timeout=abort: "exit with HANG_EXIT_CODE"
``raisereq-pid<P>.json``              watchdog -> rank  on_timeout=raise: "raise the verdict in your main thread"
``notify-pid<P>.json``                watchdog -> rank  "the signal on its way is mine" (else: a foreign one)
``watch-request.json``                ``watch``         a live view is open: write live documents
``live-rank<R>-pid<P>.json``          watchdog          the rank's positions now, while a view is open
``signal-rank<R>-pid<P>.json``        rank              the observer's handler was replaced: by what
``gather-request.json``               watchdog, relay   the gather now on
``verdict.json``, ``verdict.txt``     watchdog, relay   the latest verdict
``verdict-<id>.json``                 watchdog, relay   each verdict as merged: the record, never rewritten
``.verdict-view.json``                watchdog, relay   what the node's watchdogs read of verdict.json (its
                                                        facts, each call's ranks as runs), with its digest
``relay-rank<R>.beat``                relay             the node's relays' liveness
``relay-seen.json``                   relay             store requests already seen
``arrivals-rank<R>-pid<P>.json``      watchdog          the starts of the rank's recent calls
``stragglers.json``                   watchdog (node)   who arrives last, per group (arrivals.py)
``stragglers-relayed.json``           relay             the collecting node's join, for groups across nodes
``arrivals-node-<key>.json``           relay             another node's ranks' arrivals documents (relay.py)
====================================  ================  ================================================

The request files (stackreq, exitreq, raisereq, notify, signal, watch-request, gather-request) are named here;
their contents, and both halves of each protocol, are one versioned type each in ``requests.py``.  Every
path into ``dump_dir`` goes through ``DumpDir`` (tests/unit/test_dumpdir_owner.py checks that no other module
joins onto it), so that every reader survives a full or read-only directory.

A full ``dump_dir`` (``ENOSPC``, ``EDQUOT``) must not blind the observer: ``DumpDir`` then writes to a
*spill* directory of the node (``/dev/shm`` or the temporary directory, one per dump_dir, the same for
every process of the node), says so once, and reads both.  ``report DIR`` on that node finds spilled
files too.
"""
import errno
import hashlib
import json
import os
import re
import tempfile

REPORT = "report-rank%s-pid%d.json"
STATE = "state-rank%s-pid%d.json"
END = "end-rank%s-pid%d.json"
NODE_STATES = "states-node%d.json"
STACKS = "stacks-rank%s-pid%d.txt"
PYSPY = "pyspy-rank%s-pid%d.txt"
FR = "fr-rank%s-pid%d.json"
STACK_REQUEST = "stackreq-pid%d.json"
EXIT_REQUEST = "exitreq-pid%d.json"
RAISE_REQUEST = "raisereq-pid%d.json"
NOTIFY = "notify-pid%d.json"
WATCH_REQUEST = "watch-request.json"
LIVE = "live-rank%s-pid%d.json"
LIVE_GLOB = "live-rank*.json"
HANDLER = "signal-rank%s-pid%d.json"
GATHER = "gather-request.json"
VERDICT_JSON = "verdict.json"
VERDICT_TEXT = "verdict.txt"
VERDICT_RECORD = "verdict-%s.json"
VERDICT_VIEW = ".verdict-view.json"  # hidden: not a verdict (a script's verdict*.json finds none of it)
RELAY_BEAT = "relay-rank%d.beat"
RELAY_SEEN = "relay-seen.json"
ARRIVALS = "arrivals-rank%s-pid%d.json"
STRAGGLERS = "stragglers.json"
STRAGGLERS_RELAYED = "stragglers-relayed.json"  # the node that joins arrivals across nodes: its join (relay.py)

REPORT_GLOB = "report-rank*.json"
STATE_GLOB = "state-rank*.json"
END_GLOB = "end-rank*.json"
NODE_GLOB = "states-node*.json"
RECORD_GLOB = "verdict-*.json"
ARRIVALS_GLOB = "arrivals-rank*.json"
ARRIVALS_NODE = "arrivals-node-%s.json"  # another node's ranks' arrivals, brought by the relay (by its key)
ARRIVALS_NODE_GLOB = "arrivals-node-*.json"

_OURS = re.compile(r"^(report|state|end|stacks|pyspy|fr|signal|arrivals|live)-rank|^states-node\d+\.json$|^arrivals-node-"
                   r"|^(stack|exit)req-pid|^notify-pid|^(verdict|gather-request|stragglers|stragglers-relayed|watch-request)\.|^verdict-.*\.json$"
                   r"|^relay-|^\.tmp-|^\.c10d_observer-|^\.verdict-view\.json$")
_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))


def _r(rank):
    return rank if isinstance(rank, int) and rank >= 0 else "unknown"


def report_name(rank, pid):
    return REPORT % (_r(rank), pid)


def state_name(rank, pid):
    return STATE % (_r(rank), pid)


def end_name(rank, pid):
    return END % (_r(rank), pid)


def node_states_name(slot):
    return NODE_STATES % slot


def stacks_name(rank, pid):
    return STACKS % (_r(rank), pid)


def py_spy_name(rank, pid):
    return PYSPY % (_r(rank), pid)


def fr_name(rank, pid):
    return FR % (_r(rank), pid)


def stack_request_name(pid):
    return STACK_REQUEST % pid


def exit_request_name(pid):
    return EXIT_REQUEST % pid


def raise_request_name(pid):
    return RAISE_REQUEST % pid


def notify_name(pid):
    return NOTIFY % pid


def live_name(rank, pid):
    return LIVE % (_r(rank), pid)


def handler_name(rank, pid):
    return HANDLER % (_r(rank), pid)


def record_name(gather_id):
    return VERDICT_RECORD % re.sub(r"[^A-Za-z0-9_.-]", "_", str(gather_id))


def arrivals_name(rank, pid):
    return ARRIVALS % (_r(rank), pid)


def arrivals_rank(name):
    """The rank of an arrivals document's file name (``arrivals-rank<R>-pid<P>.json``), or None."""
    m = re.match(r"^arrivals-rank(\d+)-pid\d+\.json$", os.path.basename(name))
    return int(m.group(1)) if m else None


def beat_name(rank):
    return RELAY_BEAT % rank


def beat_rank(name):
    """The rank of a relay's beat file name, or None."""
    m = re.match(r"^relay-rank(\d+)\.beat$", name)
    return int(m.group(1)) if m else None


def is_ours(name):
    """Whether a file name in dump_dir is one of the observer's (else: torch's dumps, the user's files)."""
    return bool(_OURS.match(os.path.basename(name)))


def is_full(exc):
    """Whether an OSError says the filesystem has no room (no space, or the quota is used up)."""
    return isinstance(exc, OSError) and exc.errno in _FULL


# -- writing and reading --------------------------------------------------------------------------------
def write_json(path, obj):
    """JSON to a temporary name beside ``path``, renamed into place: a reader never sees half a file.

    One line, through ``json.dumps`` without indent: the only form json encodes in C (``json.dump`` and any
    indent take the pure-Python encoder, 20 to 50 times slower: at 1,024 ranks it was most of the gather's
    time, benchmarks/scale.py).  ``report DIR`` and ``--json`` give the readable forms."""
    write_text(path, json_text(obj))


def json_text(obj):
    """A JSON document's text as every writer here writes it (``write_json``)."""
    return json.dumps(obj, sort_keys=True) + "\n"


def write_text(path, text):
    tmp = os.path.join(os.path.dirname(path) or ".", ".tmp-%d-%s" % (os.getpid(), os.path.basename(path)))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_json(path):
    """The JSON in a file, or None if it is missing, partly written or not JSON."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def size(path):
    try:
        return os.path.getsize(path)
    except (OSError, TypeError):
        return -1


# -- the spill directory: where a node's files go while dump_dir is full ---------------------------------
def spill_dir(dump_dir):
    """The node-local directory for ``dump_dir``'s files while it is full: the same path for every
    process of the node (a hash of dump_dir's absolute path), in /dev/shm where writable, else the
    temporary directory."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
    key = hashlib.sha1(os.path.abspath(dump_dir).encode("utf-8", "replace")).hexdigest()[:12]
    return os.path.join(base, ".c10d_observer-spill-%s" % key)


class DumpDir(object):
    """One dump_dir and its spill directory.  ``path(name)`` is where a file is now (the spill directory
    once it has been written there); ``write_json`` goes to dump_dir, or to the spill directory when
    dump_dir is full (``said`` is called once with the reason); ``glob`` lists both."""

    def __init__(self, path, said=None):
        self.root = path
        self.spill = spill_dir(path)
        self.spilled = False
        self._said = said

    def join(self, name):
        return os.path.join(self.root, name)

    def path(self, name):
        if self.spilled or os.path.isdir(self.spill):
            alt = os.path.join(self.spill, name)
            if os.path.exists(alt):
                return alt
        return os.path.join(self.root, name)

    def _to_spill(self, exc):
        if not self.spilled:
            self.spilled = True
            if self._said is not None:
                self._said("%s is full (%s): the observer's files go to %s meanwhile (report %s reads them "
                           "there on this node)" % (self.root, os.strerror(exc.errno), self.spill, self.root))
        os.makedirs(self.spill, exist_ok=True)

    def write_json(self, name, obj):
        """Write one document; returns its path.  Raises OSError where neither directory takes it."""
        return self.write_text(name, json_text(obj))

    def write_text(self, name, text):
        if not self.spilled:
            try:
                write_text(self.join(name), text)
                return self.join(name)
            except OSError as e:
                if not is_full(e):
                    raise
                self._to_spill(e)
        path = os.path.join(self.spill, name)
        write_text(path, text)
        return path

    def append_text(self, name, text):
        """Append to a file (a stacks file); to its spill twin where dump_dir is full.  Returns the path."""
        for path in ([] if self.spilled else [self.join(name)]) + [os.path.join(self.spill, name)]:
            try:
                with open(path, "a") as f:
                    f.write(text)
                return path
            except OSError as e:
                if not is_full(e) or path.startswith(self.spill):
                    raise
                self._to_spill(e)
        return None

    def read_json(self, name):
        return read_json(self.path(name))

    def take(self, name):
        """A request file (watchdog -> rank), taken away whole: its JSON ({} where unreadable), or None where
        there is none.  Renamed before it is read, so a request written meanwhile is a new file, never lost."""
        path = self.path(name)
        if not os.path.exists(path):
            return None
        taken = path + ".taken"
        try:
            os.rename(path, taken)
        except OSError:
            return None
        doc = read_json(taken)
        try:
            os.remove(taken)
        except OSError:
            pass
        return doc if isinstance(doc, dict) else {}

    def remove(self, name):
        for path in (self.join(name), os.path.join(self.spill, name)):
            try:
                os.remove(path)
            except OSError:
                pass

    def stat(self, name):
        """os.stat of the file where it is now, or None where there is none."""
        try:
            return os.stat(self.path(name))
        except OSError:
            return None

    def mtime(self, name):
        st = self.stat(name)
        return st.st_mtime if st is not None else None

    def touch(self, name, when):
        """Create or date a marker file (a relay's beat); to its spill twin where dump_dir is full."""
        for path in ([] if self.spilled else [self.join(name)]) + [os.path.join(self.spill, name)]:
            try:
                if not os.path.exists(path):
                    with open(path, "a"):
                        pass
                os.utime(path, (when, when))
                return path
            except OSError as e:
                if not is_full(e) or path.startswith(self.spill):
                    raise
                self._to_spill(e)
        return None

    def read_bytes(self, name):
        """A file's bytes, or None where it cannot be read."""
        try:
            with open(self.path(name), "rb") as f:
                return f.read()
        except OSError:
            return None

    def read_text(self, name):
        """A file's text, or None where it cannot be read."""
        try:
            with open(self.path(name)) as f:
                return f.read()
        except (OSError, UnicodeDecodeError):
            return None

    def exists(self, name):
        return os.path.exists(self.path(name))

    def names(self):
        """The names of the files in dump_dir and its spill directory."""
        found = set()
        for d in (self.root, self.spill):
            try:
                found.update(os.listdir(d))
            except OSError:
                pass
        return sorted(found)

    def glob(self, pattern):
        import glob as _glob
        found = _glob.glob(os.path.join(self.root, pattern))
        if os.path.isdir(self.spill):
            have = set(os.path.basename(p) for p in found)
            found += [p for p in _glob.glob(os.path.join(self.spill, pattern)) if os.path.basename(p) not in have]
        return sorted(found)
