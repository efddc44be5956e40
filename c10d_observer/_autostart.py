"""On by environment alone: ``C10D_OBSERVER=1`` observes every process that joins a process group.

The package installs ``c10d_observer.pth`` into site-packages (setup.py), one line that the interpreter
runs at start-up, as pytest-cov does to measure subprocesses.  With ``C10D_OBSERVER`` unset it reads one
variable and imports nothing.  Set, it imports this module, which only adds a finder to ``sys.meta_path``:
when ``torch.distributed`` is first imported, its ``init_process_group`` is wrapped, and the observer is
enabled (settings from the ``C10D_OBSERVER_*`` variables) once a process group exists.  So torchrun
workers, ``mp.spawn`` and ``multiprocessing`` children and plain ``python`` ranks are observed, while the
launcher itself and subprocesses that never make a process group (DataLoader workers, compilers) are
never touched.  Nothing here may break the process: every failure is one line on stderr.
"""
import functools
import os
import sys

from .console import say as _say

ENV = "C10D_OBSERVER"
_OFF = ("", "0", "false", "no", "off")
_TARGET = "torch.distributed"


def wanted(environ=None):
    return (environ if environ is not None else os.environ).get(ENV, "").strip().lower() not in _OFF




SETTINGS = {}  # enable()'s arguments once the group exists: ``run``'s options (the environment's otherwise)


def _start():
    try:
        import c10d_observer
        from c10d_observer import observer as _observer
        if _observer.active() is None:  # a second group, or enable() called by the job itself: as it is
            c10d_observer.enable(**SETTINGS)
    except Exception as e:  # a bad C10D_OBSERVER_* value or anything else: say it, never break the job
        _say("not enabled (%s): %s" % ("run's options" if SETTINGS else "%s=%s" % (ENV, os.environ.get(ENV)), e))


_RECORDER = []  # the recorder's switch is looked at once, before the process's first group


def _before_init():
    """torch 2.5-2.10 record calls in their flight recorder only where a buffer size is set before the first
    group: set it then (compat.recorder_on_before_init), said once on local rank 0."""
    if _RECORDER:
        return
    _RECORDER.append(True)
    try:
        from c10d_observer import compat
        name = compat.recorder_on_before_init()
        if name and os.environ.get("LOCAL_RANK", "0") in ("", "0") and not _quiet():
            _say("set %s=%s before the first process group: torch's flight recorder (off by default before torch "
                 "2.11) records this job's calls, and the observer reads it at no cost per call (set %s=0 in the "
                 "job's environment to keep the recorder off)" % (name, os.environ[name], name))
    except Exception as e:
        _say("could not turn torch's flight recorder on: %r" % (e,))


def _arm(module):
    """Wrap ``init_process_group`` where user code finds it (``torch.distributed`` and ``distributed_c10d``)."""
    c10d = getattr(module, "distributed_c10d", None)
    orig = getattr(module, "init_process_group", None)
    if orig is None or getattr(orig, "_c10d_observer_armed", False):
        return

    @functools.wraps(orig)
    def init_process_group(*args, **kwargs):
        _before_init()
        result = orig(*args, **kwargs)
        _start()
        return result

    init_process_group._c10d_observer_armed = True
    module.init_process_group = init_process_group
    if c10d is not None and getattr(c10d, "init_process_group", None) is orig:
        c10d.init_process_group = init_process_group


class _Loader(object):
    """The real loader of torch.distributed, then ``_arm`` on the executed module."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        try:
            _arm(module)
        except Exception as e:
            _say("could not watch init_process_group: %r" % (e,))

    def __getattr__(self, name):
        return getattr(self.loader, name)


class _Finder(object):
    """Finds nothing itself: hands torch.distributed's spec on with a loader that arms it, once."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _TARGET:
            return None
        try:
            sys.meta_path.remove(self)  # one shot; the other finders below find the real spec
        except ValueError:
            pass
        try:
            import importlib.util
            spec = importlib.util.find_spec(fullname)
        except Exception:
            return None
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader)
        return spec


def pth_installed():
    """Whether c10d_observer.pth sits in a site-packages directory of this interpreter."""
    import site
    dirs = list(getattr(site, "getsitepackages", lambda: [])())
    try:
        dirs.append(site.getusersitepackages())
    except Exception:
        pass
    return any(os.path.exists(os.path.join(d, "c10d_observer.pth")) for d in dirs)


def export(cfg, environ=None):
    """Put an enabled observer's settings into the environment for the processes this one starts (``run``
    does, so that ranks its script starts with mp.spawn are observed with the same settings)."""
    from . import config as _config
    env = os.environ if environ is None else environ
    env[ENV] = "1"
    env[_config.ENV_TIMEOUT] = repr(cfg.timeout)
    env[_config.ENV_POLL_INTERVAL] = repr(cfg.poll_interval)
    env[_config.ENV_DIR] = os.path.abspath(cfg.dump_dir)
    env[_config.ENV_SOURCE] = cfg.source
    env[_config.ENV_ON_TIMEOUT] = cfg.on_timeout
    env[_config.ENV_SIGNAL] = _config.signal_name(cfg.signal)


def arm(settings=None):
    """Enable the observer right after the process's first ``init_process_group`` returns, with ``settings``
    (``run`` does, so that a signal handler the script installs at its top is the one the observer's passes
    its signal on to, as under C10D_OBSERVER=1).  Returns the undo: the settings cleared, the wrapper left
    in place (it only enables where none is active)."""
    SETTINGS.clear()
    SETTINGS.update(settings or {})
    mod = sys.modules.get(_TARGET)
    if mod is not None:
        _arm(mod)
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    return SETTINGS.clear


def install():
    """Called by the .pth line when C10D_OBSERVER is set."""
    if not wanted():
        return
    mod = sys.modules.get(_TARGET)
    if mod is not None:  # already imported (not at start-up, but in case): arm it now
        _arm(mod)
        return
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


# The line setup.py installs as site-packages/c10d_observer.pth (a .pth line that starts with "import" is run
# by the interpreter at start-up, site.py).  Unset, it costs one dictionary lookup.
PTH_LINE = (
    "import os, sys; "
    "exec('try:\\n import c10d_observer._autostart as a\\n a.install()\\nexcept Exception as e:\\n "
    "sys.stderr.write(\"c10d_observer: not enabled: %r\\\\n\" % (e,))') "
    "if os.environ.get('C10D_OBSERVER', '').strip().lower() not in ('', '0', 'false', 'no', 'off') else None\n"
)


def _quiet():
    from c10d_observer import config
    return config.flag(config.ENV_QUIET)
