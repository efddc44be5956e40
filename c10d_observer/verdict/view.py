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
from .fields import enum_of
from .types import Hang, Host

VIEW_FORMAT = "c10d_observer.verdict_view"
# of a verdict and of each of its stuck calls (Hang), what a watchdog reads (protocols.py: Gather, PendingSignal,
# Abort; watchdog_io.Notifier; watchdog_end); besides, of a call, whether its rank waits in it or never arrived
_FACTS = ("gather_id", "summary", "level", "held_until", "held_why", "culprit_ranks", "verdict_at")
_HANG_FIELDS = ("group", "stream", "seq", "op", "level", "held_until", "held_why", "started_at", "detected_at")
_RANK_LISTS = ("waiting_ranks", "missing_ranks")


def digest(data):
    """The digest a view file names its verdict.json by: the SHA-1 of its bytes (1.5 ms for 1.9 MB here)."""
    return hashlib.sha1(data).hexdigest()


def compact(doc):
    """A verdict's JSON (``doc``) as the view file holds it: its facts, its culprits' hosts, and of each stuck
    call the fields above and its lists of waiting and missing ranks as runs (channel.rank_runs): a few
    hundred bytes where the verdict of 16,384 ranks is 1.9 MB."""
    out = {k: doc[k] for k in _FACTS if k in doc}
    hosts = doc.get("hosts") if isinstance(doc.get("hosts"), dict) else {}
    out["hosts"] = {str(r): hosts[str(r)] for r in doc.get("culprit_ranks") or () if str(r) in hosts}
    out["hangs"] = []
    for h in doc.get("hangs") or ():
        if not isinstance(h, dict):
            continue
        part = {k: h[k] for k in _HANG_FIELDS if k in h}
        for k in _RANK_LISTS:
            ranks = h.get(k)
            if isinstance(ranks, list) and all(type(r) is int for r in ranks):
                part[k + "_runs"] = rank_runs(ranks)
            elif k in h:
                part[k] = ranks  # as it is: membership is asked of it as of a list
        out["hangs"].append(part)
    return out


def view_file(doc, data):
    """The view file's document of a verdict's JSON ``doc`` whose bytes in verdict.json are ``data``."""
    return {"format": VIEW_FORMAT, "version": 1, "of": digest(data), "verdict": compact(doc)}


def from_view_file(view, data):
    """The compact verdict a view file holds, where it is of verdict.json's bytes ``data``, else None."""
    if (isinstance(view, dict) and view.get("format") == VIEW_FORMAT and isinstance(view.get("verdict"), dict)
            and isinstance(view["verdict"].get("hangs"), list) and view.get("of") == digest(data)):
        return view["verdict"]
    return None


class RankView(object):
    """One rank's view of a verdict (module docstring), made of its compact form (``compact``): ``gather_id``,
    ``summary``, ``level``, ``held_until``, ``held_why``, ``culprit_ranks`` and ``verdict_at`` as the verdict has
    them; ``hosts`` ({"<rank>": Host}) of the culprits only; ``hangs``, each a Hang with the fields above and,
    of its lists of ranks, ``waiting_ranks`` and ``missing_ranks`` holding this rank where the verdict's do and
    nothing else (the one question a watchdog asks of them)."""

    __slots__ = ("rank", "gather_id", "summary", "level", "held_until", "held_why", "culprit_ranks", "verdict_at",
                 "hosts", "hangs")

    def __init__(self, brief, rank):
        self.rank = rank
        self.gather_id = brief.get("gather_id")
        self.summary = brief.get("summary")
        level = brief.get("level")
        self.level = enum_of(Level)(level) if level is not None else None
        self.held_until = brief.get("held_until")
        self.held_why = brief.get("held_why")
        self.culprit_ranks = list(brief.get("culprit_ranks") or ())
        self.verdict_at = brief.get("verdict_at")
        hosts = brief.get("hosts") if isinstance(brief.get("hosts"), dict) else {}
        self.hosts = {k: Host.from_json(h) if isinstance(h, dict) else h for k, h in hosts.items()}
        self.hangs = [_hang_view(h, rank) for h in brief.get("hangs") or () if isinstance(h, dict)]

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
