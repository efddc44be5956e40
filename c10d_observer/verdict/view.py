"""What one rank's watchdog keeps of a merged verdict (``RankView``): the verdict's facts and this rank's part.

Every rank's watchdog reads ``verdict.json`` when it changes (watchdog_io.GatherFiles) and asks it a few
questions: is it the verdict of the gather this rank answered, is it hard, held, which ranks are its
culprits (and where their processes are, under on_timeout="abort"), which calls it holds and whether this
rank waits in them or never arrived.  The whole verdict names every rank of the job, several times: typed
(types.Verdict), one of 16,384 ranks is some 20,000 records, 54 ms to build on this VM (json.load of its
1.9 MB, 11 ms, besides), held by each of a node's watchdogs for as long as the job runs.  The view keeps the
answers only: a few scalars, the culprits' hosts and, per stuck call, its place and this rank's part.

A view is never written: the verdict on disk is the one the merge or the relay wrote (files.write), and
``write`` takes no view (files.verdict_of gives None for one).  No torch and no files here.
"""
from ..levels import Level
from .types import Hang, Host, _enum

# of a Hang, what a watchdog reads besides whether its rank waits in it or never arrived (protocols.py:
# Gather.joins, left_out; watchdog_end.write_error_file)
_HANG_FIELDS = ("group", "stream", "seq", "op", "level", "held_until", "held_why", "started_at", "detected_at")
_RANK_LISTS = ("waiting_ranks", "missing_ranks")


class RankView(object):
    """One rank's view of a verdict's JSON ``doc`` (module docstring): ``gather_id``, ``summary``, ``level``,
    ``held_until``, ``held_why``, ``culprit_ranks`` and ``verdict_at`` as the verdict has them; ``hosts``
    ({"<rank>": Host}) of the culprits and of this rank only; ``hangs``, each a Hang with the fields above
    and, of its lists of ranks, ``waiting_ranks`` and ``missing_ranks`` holding this rank where the verdict's
    do and nothing else (the one question a watchdog asks of them)."""

    __slots__ = ("rank", "gather_id", "summary", "level", "held_until", "held_why", "culprit_ranks", "verdict_at",
                 "hosts", "hangs")

    def __init__(self, doc, rank):
        self.rank = rank
        self.gather_id = doc.get("gather_id")
        self.summary = doc.get("summary")
        level = doc.get("level")
        self.level = _enum(Level)(level) if level is not None else None
        self.held_until = doc.get("held_until")
        self.held_why = doc.get("held_why")
        self.culprit_ranks = list(doc.get("culprit_ranks") or ())
        self.verdict_at = doc.get("verdict_at")
        hosts = doc.get("hosts") if isinstance(doc.get("hosts"), dict) else {}
        keep = set(str(r) for r in self.culprit_ranks) | {str(rank)}
        self.hosts = {k: Host.from_json(h) if isinstance(h, dict) else h for k, h in hosts.items() if k in keep}
        self.hangs = [_hang_view(h, rank) for h in doc.get("hangs") or () if isinstance(h, dict)]

    def __repr__(self):
        return "RankView(rank=%r, gather_id=%r, level=%r, culprit_ranks=%r, hangs=%d)" % (
            self.rank, self.gather_id, self.level, self.culprit_ranks, len(self.hangs))


def _hang_view(h, rank):
    part = {k: h[k] for k in _HANG_FIELDS if k in h}
    for k in _RANK_LISTS:
        if k in h:
            part[k] = [rank] if isinstance(h[k], list) and rank in h[k] else []
    return Hang.from_json(part)
