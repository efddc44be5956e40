"""torch's flight recorder (gloo's, and what the NCCL recorders share with it): its buffer size variables,
whether it records gloo collectives in this process (probed in a child process), and its dumps read as plain
data.  Part of ``compat``: callers read these names through ``c10d_observer.compat``."""
import os
import sys


FR_ENV = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")  # first one set wins; 0 turns it off


def fr_buffer_env():
    """(variable, value) of the first flight-recorder buffer size variable that is set, else (None, None)."""
    for name in FR_ENV:
        raw = os.environ.get(name)
        if raw is not None and raw.strip() != "":
            try:
                return name, int(raw)
            except ValueError:
                return name, None
    return None, None


_FR_PROBE = []


def fr_recording(feats):
    """(records, reason): does the flight recorder record gloo collectives in this process?

    Where a buffer size variable is set, it says (torch reads it when the recorder is first used: > 0 records,
    0 does not).  Where none is, measured, not inferred from the version: in a child process (so that the
    probe's call is never in this process's recorder, where a user's dump and torch's analyser would meet a
    group no pg_config names), a private one-rank gloo group runs one all_reduce and the recorder's pg_status
    is read before and after.  Done once per process, and its answer kept per torch build in the temporary
    folder (``_probe_cache``).  On torch 2.8-2.10 the recorder is off unless TORCH_FR_BUFFER_SIZE /
    TORCH_NCCL_TRACE_BUFFER_SIZE is > 0 (see docs/sources.md on why enable() does not turn it on)."""
    if not feats.get("flight_recorder") or not feats.get("flight_recorder_json"):
        return False, "no flight recorder in this torch"
    name, value = fr_buffer_env()
    if name is not None and value is not None and value <= 0:
        return False, "flight recorder turned off (%s=%s)" % (name, value)
    if name is not None and value is not None:
        return True, "flight recorder records gloo collectives (%s=%s); pg_status polled off the call path" % (
            name, value)
    if not _FR_PROBE:
        _FR_PROBE.append(_probe_fr_records())
    rec, detail = _FR_PROBE[0]
    if rec:
        return True, "flight recorder records gloo collectives (torch's default, probed in a child process); " \
                     "pg_status polled off the call path"
    return False, "flight recorder present but not recording gloo (%s; set TORCH_FR_BUFFER_SIZE=2000 before " \
                  "the first process group to use it)" % (detail,)


_PROBE_CODE = """
import datetime, json, sys
import torch
from torch._C import _distributed_c10d as C
def status():
    st = json.loads(C._dump_fr_trace_json(includeCollectives=False)).get("pg_status") or {}
    return {str(k): int(v.get("last_enqueued_collective", -1)) for k, v in st.items()}
before = status()
pg = C.ProcessGroupGloo(C.HashStore(), 0, 1, datetime.timedelta(seconds=10))
pg.allreduce([torch.zeros(1)]).wait()
after = status()
sys.stdout.write("recorded" if any(v > before.get(k, 0) for k, v in after.items()) else "not recorded")
"""


def _probe_cache():
    """(path, key) of the probe's answer kept for this torch build (its version and where it lives)."""
    import tempfile
    import torch
    so = getattr(torch._C, "__file__", "") or ""
    try:
        stamp = int(os.stat(so).st_mtime)
    except OSError:
        stamp = 0
    key = "%s|%s|%s" % (torch.__version__, so, stamp)
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(tempfile.gettempdir(), "c10d_observer-fr-probe-%d.json" % uid), key


def _probe_fr_records():
    import json as _json
    import subprocess
    path, key = _probe_cache()
    try:
        with open(path) as f:
            kept = _json.load(f)
        if isinstance(kept, dict) and isinstance(kept.get(key), list):
            return tuple(kept[key])
    except (IOError, OSError, ValueError):
        kept = {}
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("C10D_OBSERVER"))
    try:
        out = subprocess.run([sys.executable, "-c", _PROBE_CODE], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        return False, "probe failed: %s" % (e,)
    if out.returncode != 0 or out.stdout.strip() not in ("recorded", "not recorded"):
        return False, "probe failed: exit %s, %s" % (out.returncode, (out.stderr.strip().splitlines() or [""])[-1])
    answer = (True, "recorded") if out.stdout.strip() == "recorded" else (
        False, "torch's default buffer size is 0 here")
    try:
        kept = kept if isinstance(kept, dict) else {}
        kept[key] = list(answer)
        tmp = "%s.%d" % (path, os.getpid())
        with open(tmp, "w") as f:
            _json.dump(kept, f)
        os.replace(tmp, path)
    except (IOError, OSError):
        pass
    return answer


def fr_status():
    """{pg_id: (last_enqueued, last_completed)} from the flight recorder, without entries (cheap)."""
    from torch._C import _distributed_c10d as C
    return parse_status(C._dump_fr_trace_json(includeCollectives=False))


def parse_status(raw):
    """{pg_id: (last_enqueued, last_completed)} of a recorder dump's ``pg_status`` (JSON bytes or str)."""
    import json as _json
    st = _json.loads(raw).get("pg_status") or {}
    out = {}
    for k, v in st.items():
        try:
            out[str(k)] = (int(v.get("last_enqueued_collective", -1)), int(v.get("last_completed_collective", -1)))
        except (TypeError, ValueError, AttributeError):
            continue
    return out


class _PlainUnpickler(object):
    """Loads torch's own pickled recorder dump (bytes its C++ made in this process) as plain dicts, lists and
    scalars: any class or function named in it is refused, so nothing but data is ever built."""

    @staticmethod
    def loads(raw):
        import io
        import pickle

        class Plain(pickle.Unpickler):
            def find_class(self, module, name):
                raise pickle.UnpicklingError("not plain data: %s.%s" % (module, name))

        return Plain(io.BytesIO(raw)).load()


def _dump_entries(pickled, as_json, **kw):
    """A recorder's entries (no stack frames): its pickled dump where torch has one (half the time of the JSON
    dump, which holds the GIL as long: 29 against 62 ms for 2,000 gloo entries, and 9 against 27 ms to load;
    torch 2.13, benchmarks/fr_reads.py), else its JSON one."""
    import json as _json
    from torch._C import _distributed_c10d as C
    fn = getattr(C, pickled, None) if pickled else None
    if fn is not None:
        try:
            doc = _PlainUnpickler.loads(fn(includeCollectives=True, includeStackTraces=False, **kw))
            return doc.get("entries") or [] if isinstance(doc, dict) else []
        except TypeError:  # a release whose pickled dump takes other arguments: the JSON one
            pass
    return _json.loads(getattr(C, as_json)(includeCollectives=True, **kw)).get("entries") or []


def fr_entries():
    """The gloo flight recorder's whole buffer of entries as plain dicts (no stack frames)."""
    return _dump_entries("_dump_fr_trace", "_dump_fr_trace_json")
