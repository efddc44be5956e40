"""The verdict's files: the rank documents it is made from (loading, choosing the job), the records merged at
hang time (``verdict-<gather id>.json``), ``verdict.json`` and ``verdict.txt``, read and written here only."""
import json
import os

from .. import arrivals as _arrivals
from .. import documents as _documents
from .. import dumpdir as _dumpdir
from ..report import ReportError
from .analysis import analyze
from .outcome import _main_record, with_outcome
from .render import format_text, worded
from .fields import F, Value, public
from .types import Culprit, Verdict
from .view import RankView, compact, from_view_file, view_file

RECORD_FORMAT = "c10d_observer.verdict_record"
SAME_JOB_S = 120.0  # watchdogs of one job start within this of each other (older files are another job's)
RECORD_DOCS_UP_TO = 1024  # a record keeps the documents it was built from up to this many ranks


def _as_it_is(v):
    return v


class RecordFile(Value):
    """A record (``verdict-<gather id>.json``): its ``format`` and ``version``, the ``verdict``'s JSON and, up to
    RECORD_DOCS_UP_TO ranks, the ``documents`` it was built from (their JSON)."""
    __slots__ = ()
    # the verdict and the documents go out as the JSON they are (a verdict of 16,384 ranks is 1.9 MB: no copy)
    FIELDS = (F("format"), F("version"), F("verdict", dump=_as_it_is),
              F("documents", dump=_as_it_is, optional=True))

    @classmethod
    def of(cls, doc):
        """The record ``doc`` holds, or None where it is none (a bare verdict, anything else)."""
        rec = cls._loaded(doc) if isinstance(doc, dict) else None
        return rec if rec is not None and rec.format == RECORD_FORMAT else None

# -- loading ------------------------------------------------------------------------------------------
def _read_docs(dd, live=False, loaded=None):
    """(every rank document in ``dd``, problems); ``live``: the live view's documents too (live.py);
    ``loaded``: {path: ((mtime_ns, size), [RankDoc])} of files read already, taken where the file is as it
    was then (the merge's own scan read every answer once: watchdog_io.GatherFiles)."""
    docs, problems = [], []
    for pattern in (_dumpdir.REPORT_GLOB, _dumpdir.STATE_GLOB, _dumpdir.END_GLOB, _dumpdir.NODE_GLOB) + (
            (_dumpdir.LIVE_GLOB,) if live else ()):
        for path in dd.glob(pattern):
            got = loaded.get(path) if loaded else None
            if got is not None:
                try:
                    st = os.stat(path)
                except OSError:
                    st = None
                if st is not None and (st.st_mtime_ns, st.st_size) == got[0]:
                    docs.extend(got[1])
                    continue
            try:
                docs.extend(_documents.load(path))
            except (_documents.DocumentError, OSError) as e:
                problems.append(str(e))
    return docs, problems


read_docs = _read_docs  # the live view reads the documents as the verdict does (live.py)


def load_docs(directory, gather_id=None, torch_dumps=False, loaded=None):
    """({rank: RankDoc}, problems): one document per rank, of the newest job in ``directory``.

    ``gather_id`` (the merge): each rank's answer to that gather, else its end where it died, else its
    newest document.  Without (the job now): each rank's newest, its end preferred (the last word).
    ``torch_dumps``: also torch's own flight-recorder dumps in JSON (torch_fr.py), used where the directory
    holds no observer documents (their sequence numbers are torch's, not the observer's).  ``loaded``: files
    read already (_read_docs)."""
    if not os.path.isdir(directory):
        raise ReportError("%s is not a directory" % directory)
    docs, problems = _read_docs(_dumpdir.DumpDir(directory), loaded=loaded)
    if torch_dumps:
        from .. import torch_fr
        fr_docs, fr_problems = torch_fr.load_dir(directory)
        problems.extend(fr_problems)
        if fr_docs and docs:
            problems.append("%d torch flight-recorder dump(s) not used: the observer's own documents are"
                            % len(fr_docs))
        elif fr_docs:
            docs = fr_docs
    return per_rank(docs, gather_id), problems


def per_rank(docs, gather_id=None):
    docs = [d for d in docs if d.rank >= 0]
    if not docs:
        return {}
    newest = max(docs, key=lambda d: d.written_at or 0)
    job = newest.job_id
    starts = [d.watchdog_started_at for d in docs if d.job_id == job and d.watchdog_started_at]
    since = max(starts) - SAME_JOB_S if starts else None
    docs = [d for d in docs if d.job_id == job and not (
        since is not None and d.watchdog_started_at and d.watchdog_started_at < since)]

    def rank_of(d):
        if gather_id is not None:
            return (d.gather_id == gather_id, d.dead, d.written_at or 0)
        return (d.kind == "end", d.written_at or 0)

    out = {}
    for d in docs:
        cur = out.get(d.rank)
        if cur is None or rank_of(d) >= rank_of(cur):
            out[d.rank] = d
    return out


def load_records(directory):
    """The verdicts merged while the job ran (``verdict-<id>.json``; ``verdict.json`` where a folder of an
    earlier release has no record), oldest first: [(Verdict, [RankDoc] it was built from or None)]; each
    file's JSON is read here, once."""
    dd = _dumpdir.DumpDir(directory)
    out, seen = [], {}
    for path in dd.glob(_dumpdir.RECORD_GLOB):
        rec = RecordFile.of(_dumpdir.read_json(path))
        v = verdict_of(rec.verdict) if rec is not None else None
        if v is None:
            continue
        docs = _record_documents(rec, path)
        gid = v.gather_id
        if gid in seen:  # several nodes' folders copied together: one record per gather, with its documents
            if docs is not None and out[seen[gid]][1] is None:
                out[seen[gid]] = (v, docs)
            continue
        seen[gid] = len(out)
        out.append((v, docs))
    if not out:
        v = verdict_of(dd.read_json(_dumpdir.VERDICT_JSON))
        if v is not None and v.gather_id:
            out.append((v, None))
    out.sort(key=lambda x: x[0].verdict_at or 0)
    return out


def load(directory, default_dir=None):
    """(verdict, problems, directory read) for ``report DIR``, ``load_verdict`` and the page.

    The verdict merged while the job ran is the record: shown as it was, with what happened after; where
    none was merged, the verdict is made now from the documents.  Where DIR holds no document but
    DIR/<default_dir> does (the job's folder), that is read.  A folder with none is an error (ReportError),
    never an empty verdict: a check must not read it as a healthy job."""
    docs, problems = load_docs(directory, torch_dumps=True)
    records = load_records(directory)
    inner = os.path.join(directory, default_dir) if default_dir else None
    if not docs and not records and inner and os.path.isdir(inner):
        directory = inner
        docs, problems = load_docs(directory, torch_dumps=True)
        records = load_records(directory)
    if not docs and not records:
        raise ReportError(
            "%s holds no c10d-observer report or state (report-rank*.json, state-rank*.json, end-rank*.json) "
            "and no torch flight-recorder dump in JSON%s.  Pass the job's dump_dir: ./%s unless "
            "enable(dump_dir=...), run --dump-dir or $C10D_OBSERVER_DIR chose another."
            % (directory, "".join("\n  unreadable: %s" % p for p in problems), default_dir or "c10d_observer"))
    if not records:
        records = _gathered(directory)
    if not records:
        v = worded(analyze(docs, stragglers=_arrivals.read(directory))).replace(recorded=False)
        return v.with_exit_code(), problems, directory
    v = with_outcome(records, docs)
    if not v.has("culprits"):  # a record written before culprits carried their node: the host stands for it
        v = v.replace(culprits=[_host_culprit(r, v.host(r)) for r in v.culprit_ranks or ()])
    return v.with_exit_code(), problems, directory


def _host_culprit(rank, host):
    """A culprit of a record written before culprits carried their node: its host (of the record's ``hosts``)
    stands for its node."""
    name, pid = (host.host, host.pid) if host is not None else (None, None)
    return Culprit(rank=rank, node=name, node_from="hostname" if name else None, host=name, pid=pid)


def _gathered(directory):
    """Where no verdict was merged (the job ended, or the late rank caught up, within the gather window),
    the verdict made now from the newest gather's answers: the states at hang time, not the ends since;
    [] where no gather has states."""
    all_docs, _ = _read_docs(_dumpdir.DumpDir(directory))
    states = [d for d in all_docs if d.kind == "state" and d.gather_id and not d.relayed_from]
    if not states:
        return []
    gid = max(states, key=lambda d: d.written_at or 0).gather_id
    docs = per_rank(all_docs, gather_id=gid)
    v = analyze(docs)
    if not v.hangs:
        return []
    v = worded(v).replace(gather_id=gid, verdict_at=max(d.written_at or 0 for d in docs.values() if d.gather_id == gid),
                  gather_s=None, merged=False)
    return [(v, list(docs.values()))]


def main_record(directory, docs_now=None):
    """The Verdict of the record ``report`` leads with (the first hang's: outcome._main_record), as merged, or
    None where no record is there yet."""
    records = load_records(directory)
    main = _main_record(records, docs_now) if records else None
    return main[0] if main is not None else None


def record_documents(directory):
    """The documents the shown record was built from, by rank, or None (the page draws them)."""
    records = load_records(directory) or _gathered(directory)
    main = _main_record(records, load_docs(directory, torch_dumps=True)[0] if len(records) > 1 else None)
    if main is None or main[1] is None:
        return None
    return {d.rank: d for d in main[1]}


def read(path):
    """The Verdict in a verdict file (``verdict.json``, or a record's), or None where there is none or it is
    not a verdict."""
    return verdict_of(_dumpdir.read_json(path))


def rank_view(dd, rank):
    """What rank ``rank``'s watchdog keeps of ``verdict.json`` in DumpDir ``dd`` (a view.RankView: the
    verdict's facts and this rank's part), or None where there is none or it is not a verdict: from the view
    file written beside it (``write``) where that is of these very bytes, else from the verdict itself."""
    data = dd.read_bytes(_dumpdir.VERDICT_JSON)
    if data is None:
        return None
    brief = from_view_file(dd.read_json(_dumpdir.VERDICT_VIEW), data)
    if brief is not None:
        return RankView(brief, rank)
    try:
        doc = json.loads(data.decode("utf-8"))
    except ValueError:  # partly written (by a writer other than write(), which renames into place)
        return None
    return view_of(doc, rank)


def view_of(doc, rank):
    """Rank ``rank``'s view (a view.RankView) of a verdict's JSON (bare, or a record's), or None where ``doc``
    holds none."""
    doc = _verdict_json(doc)
    return RankView(compact(doc), rank) if doc is not None else None


def verdict_of(doc):
    """The Verdict in a verdict's JSON as a file or the store holds it (bare, or a record's), or None where
    ``doc`` holds none; a Verdict as it is.  Every verdict read back from a file or the store is read here."""
    if isinstance(doc, Verdict):
        return doc
    doc = _verdict_json(doc)
    return Verdict.from_json(doc) if doc is not None else None


def _verdict_json(doc):
    """The verdict's JSON in ``doc`` (bare, or a record's), or None where ``doc`` holds none (no list of hangs):
    the one rule by which a verdict is read (``verdict_of``) and a rank's view of it (``view_of``)."""
    rec = RecordFile.of(doc)
    if rec is not None:
        doc = rec.verdict
    return doc if isinstance(doc, dict) and isinstance(doc.get("hangs"), list) else None


def _record_documents(rec, path):
    """The rank documents a record holds ([RankDoc]), or None where it holds none or one is unreadable."""
    docs = rec.documents
    if not isinstance(docs, list):
        return None
    try:
        return [_documents.RankDoc.from_json(d, path) for d in docs]
    except _documents.DocumentError:
        return None


def record(v, docs=None, _public=None):
    """The record of a verdict: the verdict and, up to RECORD_DOCS_UP_TO ranks, the documents it was built
    from (so that the page draws the job as it was at hang time).  ``_public``: public(v), where made already."""
    return _record_file(docs, public(v) if _public is None else _public).to_json()


def _record_file(docs, doc):
    kept = {} if docs is None or len(docs) > RECORD_DOCS_UP_TO else {
        "documents": [d.to_json() for _, d in sorted(docs.items())]}
    return RecordFile(format=RECORD_FORMAT, version=1, verdict=doc, **kept)


def write(dd, v, docs=None, text=None):
    """verdict.txt, then the node's watchdogs' view of it (``.verdict-view.json``, view.py), then verdict.json
    (whoever waits for the JSON, the on_hang callback, the pytest plugin, users' scripts, finds the text
    beside it), then the record ``verdict-<gather id>.json``, never rewritten.  ``v``: a Verdict (or its
    JSON: tests, earlier callers); ``dd``: a dumpdir.DumpDir or a path."""
    if not isinstance(dd, _dumpdir.DumpDir):
        dd = _dumpdir.DumpDir(dd)
    v = verdict_of(v)
    if v is None:
        raise ValueError("verdict.write: v must be a Verdict or a verdict's JSON (a dict with 'hangs')")
    _write_files(dd, public(v), v.gather_id, text if text is not None else format_text(v) + "\n", docs)


def write_relayed(dd, doc, text, **extra):
    """``write`` of a verdict's JSON as another node's relay sent it (``doc``: plain JSON, as the store held
    it), with keys ``extra`` beside its fields (``relayed_from``), and its text: the same files byte for byte
    as ``write(dd, verdict_of(doc).with_extra(**extra), text=text)``, without making the verdict typed and its
    JSON again (each node's relay writes it on the way to the verdict on every node: at 16,384 ranks that was
    60 of its 104 ms, 2026-12-01).  The Verdict read (lazily), or None where ``doc`` holds none."""
    if not isinstance(dd, _dumpdir.DumpDir):
        dd = _dumpdir.DumpDir(dd)
    v = verdict_of(doc)
    if v is None:
        return None
    v = v.with_extra(**extra)
    if "exit_code" in doc or text is None:  # a field the typed verdict derives, or words to make: the long way
        write(dd, v, text=text)
    else:
        _write_files(dd, dict(doc, **extra), v.gather_id, text, None)
    return v


def _write_files(dd, doc, gather_id, text, docs):
    dd.write_text(_dumpdir.VERDICT_TEXT, text)
    body = _dumpdir.json_text(doc)  # made once for the files below: at 16,384 ranks 20 ms each time
    try:  # first: the node's watchdogs read it once they see verdict.json change (view.py)
        dd.write_json(_dumpdir.VERDICT_VIEW, view_file(doc, body.encode("utf-8")))
    except OSError:
        pass  # each watchdog reads the verdict itself, as the digest then says
    dd.write_text(_dumpdir.VERDICT_JSON, body)
    if gather_id:
        dd.write_text(_dumpdir.record_name(gather_id), _record_text(_record_file(docs, doc), body))


def _record_text(rec, body):
    """json_text of RecordFile ``rec``, where ``body`` is json_text(rec.verdict): a record without its documents is
    the verdict's text inside its own two keys (the same bytes as json.dumps with sorted keys makes them)."""
    if rec.has("documents") or rec.extra:
        return _dumpdir.json_text(rec.to_json())
    return '{"format": %s, "verdict": %s, "version": %s}\n' % (
        json.dumps(rec.format), body[:-1], json.dumps(rec.version))

