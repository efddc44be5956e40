"""What one rank's watchdog keeps of a merged verdict (``RankView``): the verdict's facts and this rank's part.

Every rank's watchdog reads ``verdict.json`` when it changes (watchdog_io.GatherFiles) and asks it a few
questions: is it the verdict of the gather this rank answered, is it hard, held, which ranks are its
culprits (and where their processes are, under on_timeout="abort"), which calls it holds and whether this
rank waits in them or never arrived.  The whole verdict names every rank of the job, several times: typed
(types.Verdict), one of 16,384 ranks is some 20,000 records, 54 ms to build on this VM besides its
``json.load`` (1.9 MB, 11 to 25 ms), held by each of a node's watchdogs for as long as the job runs.

So the view keeps the answers only (a few scalars, the culprits' hosts, per stuck call its place and its
waiting and missing ranks), and whoever writes a verdict (files.write) writes them first beside it
(``.verdict-view.json``: ``compact``, with the SHA-1 of verdict.json's bytes): a watchdog reads verdict.json's
bytes and the small file, and parses the verdict itself only where the digests differ (a verdict written
some other way, a view file that could not be written).  What is read is always what verdict.json says.

A view is never written as a verdict: the verdict on disk is the one the merge or the relay wrote, and
``files.write`` takes no view (files.verdict_of gives None for one).  No torch here.
"""
import hashlib

from ..channel import rank_runs
from ..levels import Level
from .fields import F, Value, as_list, dump_enum, dump_list, enum_of
from .types import Hang, Host

VIEW_FORMAT = "c10d_observer.verdict_view"
# of a verdict and of each of its stuck calls (Hang), what a watchdog reads (protocols.py: Gather, PendingSignal,
# Abort; watchdog_io.Notifier; watchdog_end); besides, of a call, whether its rank waits in it or never arrived
_FACTS = ("gather_id", "summary", "level", "held_until", "held_why", "culprit_ranks", "verdict_at")
_HANG_FIELDS = ("group", "stream", "seq", "op", "level", "held_until", "held_why", "started_at", "detected_at")
_RANK_LISTS = ("waiting_ranks", "missing_ranks")


class Brief(Value):
    """A verdict's JSON read for its facts only: the compact verdict a view file holds (``compact``), or a whole
    verdict's JSON (its other keys are kept, unread, in ``extra``).  ``hosts``: {"<rank>": a host's JSON};
    ``hangs``: the stuck calls' JSON."""
    __slots__ = ()
    FIELDS = (F("gather_id"), F("summary"), F("level", enum_of(Level), dump_enum), F("held_until"), F("held_why"),
              F("culprit_ranks", as_list, dump_list), F("verdict_at"), F("hosts"), F("hangs", as_list, dump_list))

    @classmethod
    def of(cls, doc):
        """The brief of a verdict's JSON ``doc``, or None where ``doc`` is not a verdict (no list of hangs)."""
        b = cls._loaded(doc) if isinstance(doc, dict) else None
        return b if b is not None and isinstance(b.hangs, list) else None

    def host_docs(self):
        return self.hosts if isinstance(self.hosts, dict) else {}


class ViewFile(Value):
    """``.verdict-view.json``: its ``format`` and ``version``, the SHA-1 of the verdict.json it is ``of``, and the
    compact ``verdict``."""
    __slots__ = ()
    FIELDS = (F("format"), F("version"), F("of"), F("verdict", Brief.of))


def digest(data):
    """The digest a view file names its verdict.json by: the SHA-1 of its bytes (1.5 ms for 1.9 MB here)."""
    return hashlib.sha1(data).hexdigest()


def compact(doc):
    """A verdict's JSON (``doc``) as the view file holds it: its facts, its culprits' hosts, and of each stuck
    call the fields above and its lists of waiting and missing ranks as runs (channel.rank_runs): a few
    hundred bytes where the verdict of 16,384 ranks is 1.9 MB."""
    b = Brief.of(doc)
    out = {k: doc[k] for k in _FACTS if k in doc}
    hosts = b.host_docs() if b is not None else {}
    out.update(hosts={str(r): hosts[str(r)] for r in (b.culprit_ranks or () if b else ()) if str(r) in hosts},
               hangs=[_hang_brief(h) for h in (b.hangs if b else ()) if isinstance(h, dict)])
    return out


def _hang_brief(h):
    part = {k: h[k] for k in _HANG_FIELDS if k in h}
    for k in _RANK_LISTS:
        if k not in h:
            continue
        ranks = h[k]
        if isinstance(ranks, list) and all(type(r) is int for r in ranks):
            part[k + "_runs"] = rank_runs(ranks)
        else:
            part[k] = ranks  # as it is: membership is asked of it as of a list
    return part


def view_file(doc, data):
    """The view file's document of a verdict's JSON ``doc`` whose bytes in verdict.json are ``data``."""
    return ViewFile(format=VIEW_FORMAT, version=1, of=digest(data), verdict=compact(doc)).to_json()


def from_view_file(view, data):
    """The compact verdict a view file holds (a Brief), where it is of verdict.json's bytes ``data``, else None."""
    f = ViewFile.from_json(view) if isinstance(view, dict) else None
    if f is not None and f.format == VIEW_FORMAT and f.verdict is not None and f.of == digest(data):
        return f.verdict
    return None


class RankView(object):
    """One rank's view of a verdict (module docstring), made of its compact form (``compact``, read as a
    ``Brief``): ``gather_id``, ``summary``, ``level``, ``held_until``, ``held_why``, ``culprit_ranks`` and
    ``verdict_at`` as the verdict has them; ``hosts`` ({"<rank>": Host}) of the culprits only; ``hangs``, each a
    Hang with the fields above and, of its lists of ranks, ``waiting_ranks`` and ``missing_ranks`` holding this
    rank where the verdict's do and nothing else (the one question a watchdog asks of them)."""

    __slots__ = ("rank", "gather_id", "summary", "level", "held_until", "held_why", "culprit_ranks", "verdict_at",
                 "hosts", "hangs")

    def __init__(self, brief, rank):
        if not isinstance(brief, Brief):
            brief = Brief.of(brief) or Brief(hangs=[])
        self.rank = rank
        self.gather_id, self.summary, self.level = brief.gather_id, brief.summary, brief.level
        self.held_until, self.held_why, self.verdict_at = brief.held_until, brief.held_why, brief.verdict_at
        self.culprit_ranks = list(brief.culprit_ranks or ())
        self.hosts = {k: Host.from_json(h) if isinstance(h, dict) else h for k, h in brief.host_docs().items()}
        self.hangs = [_hang_view(h, rank) for h in brief.hangs or () if isinstance(h, dict)]

    def __repr__(self):
        return "RankView(rank=%r, gather_id=%r, level=%r, culprit_ranks=%r, hangs=%d)" % (
            self.rank, self.gather_id, self.level, self.culprit_ranks, len(self.hangs))


def _hang_view(h, rank):
    part = {k: h[k] for k in _HANG_FIELDS if k in h}
    for k in _RANK_LISTS:
        if k + "_runs" in h:
            part[k] = [rank] if _in_runs(rank, h[k + "_runs"]) else []
        elif k in h:
            part[k] = [rank] if isinstance(h[k], list) and rank in h[k] else []
    return Hang.from_json(part)


def _in_runs(rank, runs):
    if type(rank) is not int:
        return False
    for first, count, step in runs:
        if first <= rank <= first + step * (count - 1) and (rank - first) % step == 0:
            return True
    return False
