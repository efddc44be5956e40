"""What the watchdog's decisions carry: ``Action(kind, detail)``, each kind with the one payload it takes
(``PAYLOADS``), checked when it is made, so that a wrong payload fails where it is made (in the tests), not in
the effect (watchdog.Watchdog.act); and ``Machine``, the phases-and-table base of every protocol.  No imports
of the package.
"""
from collections import namedtuple


class ProtocolError(RuntimeError):
    """A machine was asked for a transition its table does not allow, or an action was made with a payload
    its kind does not take: a bug of the watchdog."""


class Machine(object):
    """A machine of phases (``phase``, a ``str``-valued enum member, since ``since_ns``) with one table of the
    transitions it allows (``ALLOWED``: phase -> the phases it may go to): a step that tries any other raises
    ProtocolError at once.  The watchdog's protocols (protocols.py) and the relay's gather window
    (relay_window.py) are such machines.  The model: NVIDIA resiliency-ext's ``RankMonitorState``."""

    ALLOWED = {}

    def can_transition_to(self, phase):
        return phase in self.ALLOWED.get(self.phase, ())

    def _to(self, phase, now_ns):
        if not self.can_transition_to(phase):
            raise ProtocolError("%s: no transition from %s to %s (allowed: %s)" % (
                type(self).__name__, self.phase.value, phase.value,
                ", ".join(p.value for p in self.ALLOWED.get(self.phase, ())) or "none"))
        self.phase, self.since_ns = phase, now_ns


def _none(d):
    return d is None


def _text(d):
    return isinstance(d, str)


def _flag(d):
    return isinstance(d, bool)


def _verdict(d):
    return hasattr(d, "hangs") and hasattr(d, "gather_id")  # verdict.types.Verdict


def _pair(first, second):
    return lambda d: isinstance(d, tuple) and len(d) == 2 and first(d[0]) and second(d[1])


# what each kind of action carries: one line per kind, checked when the action is made
PAYLOADS = {
    "report": ("nothing", _none),
    "say": ("the line to say", _text),
    "say_overdue": ("the overdue entry", lambda d: hasattr(d, "describe") and hasattr(d, "level")),
    "notify": ("the reason", _text),
    "signal": ("the reason", _text),
    "stacks": ("(the reason, whether py-spy may run)", _pair(_text, _flag)),
    "stack_request": ("the reason", _text),
    "withdraw_request": ("nothing", _none),
    "dump_signal": ("the reason", _text),
    "gather": ("the level, hard or soft", lambda d: d in ("hard", "soft")),
    "answer": ("the gather request (requests.GatherRequest)", lambda d: hasattr(d, "id") and hasattr(d, "by_rank")),
    "merge": ("nothing", _none),
    "hold": ("the held verdict", _verdict),
    "abort": ("nothing", _none),
    "abort_culprit": ("the verdict naming this rank", _verdict),
    "error_file": ("(the verdict or None, whether this rank is a culprit)",
                   _pair(lambda d: d is None or _verdict(d), _flag)),
    "exit_request": ("whether this rank is a culprit", _flag),
    "arm": ("whether this rank is a culprit", _flag),
    "disarm": ("nothing", _none),
    "term": ("nothing", _none),
    "kill": ("nothing", _none),
    "arrivals": ("nothing", _none),
    "live": ("nothing", _none),
}


class Action(namedtuple("Action", "kind detail")):
    """What tick() decided; Watchdog.act runs it.  Its kind is one of PAYLOADS and its detail what that kind
    carries, checked here, so that a wrong payload fails where it is made (in the tests), not in the effect."""

    __slots__ = ()

    def __new__(cls, kind, detail=None):
        spec = PAYLOADS.get(kind)
        if spec is None:
            raise ProtocolError("no action %r (the kinds: %s)" % (kind, ", ".join(sorted(PAYLOADS))))
        if not spec[1](detail):
            raise ProtocolError("action %s carries %s, not %r" % (kind, spec[0], detail))
        return super(Action, cls).__new__(cls, kind, detail)
