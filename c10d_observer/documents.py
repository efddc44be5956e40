"""Typed views of what the observer writes, for code that acts on a hang (``load_verdict``, ``on_hang``).

A ``Verdict`` has the fields of ``report --json`` (docs/diagnosis.md lists them) as attributes:
``v.hangs`` (``Hang`` objects, root causes first), ``v.culprit_ranks``, ``v.ranks_silent``,
``v.ranks_dead``, ``v.resolved``, ``v.summary`` and the rest; ``v.to_dict()`` is the JSON document,
``v.exit_code`` what ``report`` would exit with and ``v.text`` what it would print.  Nested objects are
``Record`` objects (``r.key`` or ``r["key"]``; keys that are not names, such as ranks in ``exits``, by item
only).  No torch, no files written: the watchdog side may use it too.
"""
import copy

__all__ = ["Record", "Hang", "Verdict"]


def _wrap(value, cls=None):
    if isinstance(value, dict):
        return (cls or Record)(value)
    if isinstance(value, list):
        return [_wrap(v, cls) for v in value]
    return value


class Record(object):
    """A JSON object read as attributes; equal to another Record of the same content."""

    __slots__ = ("_doc",)

    def __init__(self, doc):
        if not isinstance(doc, dict):
            raise TypeError("%s needs a dict, got %s" % (type(self).__name__, type(doc).__name__))
        object.__setattr__(self, "_doc", doc)

    def __getattr__(self, name):
        try:
            return _wrap(self._doc[name])
        except KeyError:
            raise AttributeError("%s has no field %r (fields: %s)" % (type(self).__name__, name,
                                                                      ", ".join(sorted(self._doc))))

    def __setattr__(self, name, value):
        raise AttributeError("%s is read-only" % type(self).__name__)

    def __getitem__(self, key):
        return _wrap(self._doc[key])

    def __contains__(self, key):
        return key in self._doc

    def get(self, key, default=None):
        return _wrap(self._doc[key]) if key in self._doc else default

    def keys(self):
        return self._doc.keys()

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(k for k in self._doc if k.isidentifier()))

    def to_dict(self):
        """The JSON document (a deep copy)."""
        return copy.deepcopy(self._doc)

    def __eq__(self, other):
        return type(other) is type(self) and other._doc == self._doc

    def __ne__(self, other):
        return not self == other

    __hash__ = None

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % (k, self._doc[k]) for k in sorted(self._doc)
                                                           if not isinstance(self._doc[k], (dict, list))))


class Hang(Record):
    """One stuck call: ``op``, ``seq``, ``group``, ``group_ranks``, ``waiting_ranks``, ``missing_ranks``
    (the ranks that never arrived), ``finished_ranks``, ``died_waiting``, ``root`` (True: start here; else
    ``caused_by`` lists the hangs that explain it), ``stuck_s``, ``timeout`` and the rest of report --json's
    hang."""

    __slots__ = ()

    @property
    def call(self):
        """The call as the console names it: 'all_reduce #3 on group 0 (ranks 0-1), 4 x float32'."""
        from .report import describe_call
        return describe_call(self._doc)


class Verdict(Record):
    """Who never arrived, for one job: what ``report DIR --json`` prints, typed."""

    __slots__ = ()

    @property
    def hangs(self):
        return _wrap(self._doc.get("hangs") or [], Hang)

    @property
    def exit_code(self):
        """What ``report`` exits with: 1 a call is stuck, 3 none is but calls were overdue and completed
        later, 0 no call was ever overdue."""
        return 1 if self._doc.get("hangs") else 3 if self._doc.get("resolved") else 0

    @property
    def text(self):
        """The verdict as ``report`` prints it (without the per-rank section)."""
        from . import verdict as _verdict
        return _verdict.format_text(self._doc, self._doc.get("unreadable") or ())
