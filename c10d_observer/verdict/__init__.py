"""One verdict across all ranks: which call is stuck, who waits in it, who never arrived and where they are.

Input: one document per rank (documents.RankDoc): a report (its watchdog found a call overdue), its state
(its answer to the gather), its end (disable(), or its process died).  Each says, per stream (a group's
collectives, or one direction of a group's p2p calls), the last call started and completed, the call in
flight and the last few calls (op, size, start time).  No torch here: the watchdog runs this.

For a stuck (stream, seq), a member rank has finished it (last completed >= seq; a rank that finished it
and ended later is "finished, then ended", never missing), entered it and waits, or never entered it: it
is *missing*, a suspect.  A missing rank that is itself waiting in another stuck call is not the root:
that call's missing ranks are (a cascade).  The culprits are the missing ranks that wait in no stuck call
(busy elsewhere, frozen, dead), the ranks that issued a different op or size at the same seq than the
majority (a desync: ops and sizes of calls that completed come from the flight recorder's entries where
the channel has none), and, for a cycle of stuck calls (an ordering deadlock), the rank whose recent order
of calls across its groups broke the order the others and its own earlier steps followed (ordering.py).
Ranks with no document are listed as silent: unknown, never guessed.  Where every member entered a stuck call
and one or more of them (not all) is frozen (its Python stopped: a stopped process, a thread holding the
GIL), the frozen ones are its culprits: the others wait for them.  Each hang says what kind it is
(``category``) and why.

The verdict a watchdog merges at hang time is a *record* (``verdict-<gather id>.json``, with the documents
it was built from): ``report``, ``load_verdict`` and the page show it as it was, and add what happened
after (``outcome`` of each hang: resolved, with how late the culprit was; ended with the job; still
stuck), read from the documents written since.  Nothing a rank writes later rewrites it.

Split by job, as torch's flight-recorder analyser is (loader, builder, types): ``types`` (the verdict as
values), ``files`` (documents and records in, verdict files out), ``analysis``, ``stacks`` (where a main
thread is), ``outcome`` (what became of a record) and ``render`` (words).
This module is the verdict's front: what the rest of the package and users call.
"""
from . import analysis as _analysis
from .analysis import VERSION, culprit_entry, phase_text
from .files import (RECORD_DOCS_UP_TO, RECORD_FORMAT, SAME_JOB_S, load, load_docs, load_records, main_record,
                    per_rank, rank_view, read, read_docs, record, record_documents, verdict_of, view_of, write,
                    write_relayed)
from .outcome import with_outcome
from . import render as _render
from .stacks import frame_text, is_library, main_thread_frames, whereabouts
from .fields import public
from .types import (Category, Culprit, Hang, Level, Mismatch, MismatchKind, Ordering, Outcome, OutcomeState, Straggler,
                    Verdict, Where, Whereabouts)
from .view import RankView

__all__ = ["VERSION", "analyze", "culprit_entry", "phase_text", "RECORD_DOCS_UP_TO", "RECORD_FORMAT", "SAME_JOB_S",
           "load", "load_docs", "load_records", "main_record", "per_rank", "rank_view", "read", "read_docs", "record", "record_documents", "verdict_of", "view_of", "write", "write_relayed",
           "acts", "culprit_nodes", "exit_code", "with_outcome", "format_text", "summary_line", "frame_text",
           "is_library", "main_thread_frames", "whereabouts", "Category", "Culprit", "Hang", "Level", "Mismatch", "MismatchKind",
           "Ordering", "Outcome", "OutcomeState", "RankView", "Straggler", "Verdict", "Where", "Whereabouts", "public"]


def analyze(by_rank, world_size=None, now=None, stragglers=None):
    """The verdict (a Verdict) from one document per rank (RankDoc, or its JSON), with its summary:
    analysis.analyze (the values), then render.worded (the words); ``stragglers``: the node's stragglers
    document (arrivals.py), named in the verdict."""
    return _render.worded(_analysis.analyze(by_rank, world_size=world_size, now=now, stragglers=stragglers))


# The front's functions take a Verdict or its JSON (users' scripts and tests hold either): the JSON is read here.
def _read(v):
    return Verdict.from_json(v)


def exit_code(v):
    """What ``report`` exits with (Verdict.exit_code): 1 a call is stuck (or was, when the job ended), 3 every
    stuck call resolved (or calls were overdue and completed later), 0 no call was ever overdue."""
    return _read(v).exit_code


def acts(v):
    """Whether a verdict is one to act on (Verdict.acts): a hard stuck call, not held, not resolved."""
    return _read(v).acts


def culprit_nodes(v):
    """The nodes of the culprits of a verdict to act on (``acts``), as Slurm's hostlist (``report DIR
    --exclude``); '' for none, and for a soft, held or resolved verdict."""
    from ..scheduler import hostlist
    v = _read(v)
    return hostlist(c.node for c in v.culprits or ()) if v.acts else ""


def summary_line(v):
    """The verdict in one line (the console's, the summary of report --json)."""
    return _render.summary_line(_read(v))


def format_text(v, problems=()):
    """The verdict as ``report`` prints it (without the per-rank section)."""
    return _render.format_text(_read(v), problems)
