"""``python -m c10d_observer`` and the ``c10d-observer`` console script: run, report, demo."""
import argparse
import os
import runpy
import sys

from . import report as _report
from .config import DEFAULT_DIR, ON_TIMEOUT_CHOICES


def _duration(text):
    from .config import parse_duration
    try:
        return parse_duration(text, "the value")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))


def _first_local():
    """True in the process that speaks for this node: not under a launcher, or local rank 0 under one
    (torchrun sets LOCAL_RANK).  Every rank of a node reads the same options and environment, so an error in
    them is said once per node (once per job on one node) instead of once per rank; the others exit 2 too."""
    return os.environ.get("LOCAL_RANK", "0").strip() in ("", "0")


def _error(text):
    """``c10d-observer: error: TEXT`` on stderr, on the first local process only; returns the exit code, 2.

    The other local ranks wait a few seconds before they exit: a launcher ends the whole group at its first
    failed worker, and that must be the one that said why (torchrun then stops the waiting ones)."""
    if _first_local():
        sys.stderr.write("c10d-observer: error: %s\n" % text)
        sys.stderr.flush()
    else:
        import time
        time.sleep(QUIET_RANK_EXIT_DELAY_S)
    return 2


QUIET_RANK_EXIT_DELAY_S = 5.0


class _Parser(argparse.ArgumentParser):
    """Bad options: one line naming the option and what is accepted, exit 2 (no usage block per rank)."""

    def error(self, message):
        self.exit(_error("%s (see %s --help)" % (message, self.prog)))


def build_parser():
    from ._version import __version__
    p = _Parser(prog="c10d-observer", description="Find hung collectives in PyTorch jobs.")
    p.add_argument("--version", action="version", version="c10d-observer %s" % __version__)
    sub = p.add_subparsers(dest="command")
    sub.required = True

    run = sub.add_parser("run", help="run a training script with the observer enabled (no code change)",
                         description="Run SCRIPT as __main__ with the observer enabled as soon as its process "
                                     "group exists (its init_process_group), as C10D_OBSERVER=1 does: a signal "
                                     "handler the script installs at its top runs on a hard verdict.  Every "
                                     "option is checked before the script starts.  Works under torchrun: "
                                     "torchrun --nproc_per_node=4 -m c10d_observer run --timeout 60 train.py")
    run.add_argument("--timeout", type=_duration,
                     help="90, 90s, 5m or 1h (default $C10D_OBSERVER_TIMEOUT, else 300 s)")
    run.add_argument("--poll-interval", type=_duration, help="time between the watchdog's checks (as --timeout)")
    run.add_argument("--dump-dir", help="reports and stack dumps (default $C10D_OBSERVER_DIR, else ./c10d_observer)")
    run.add_argument("--source", help="'auto' or an event source name (see the capabilities command)")
    run.add_argument("--on-timeout", choices=ON_TIMEOUT_CHOICES,
                     help="what a hard verdict (a call past the timeout) does: dump (report and stacks, training "
                          "goes on; the default), abort (every rank of the hang exits with code 93, the culprit "
                          "first) or raise (c10d_observer.CollectiveHang raised in each waiting rank: at once "
                          "under NCCL, whose group is aborted; when the call returns under gloo).  Soft "
                          "verdicts (learned deadlines) never act")
    run.add_argument("--signal", help="the signal sent to each rank with a call past the hard deadline, which "
                                      "runs the handler the script installed at its top (default "
                                      "$C10D_OBSERVER_SIGNAL, else SIGUSR1; SIGUSR2 where the job wants SIGUSR1 "
                                      "for itself; none: no signal).  Soft verdicts send none; stacks never need it")
    run.add_argument("-m", dest="module", metavar="MODULE",
                     help="run a module as __main__ instead of a script (like python -m); its arguments follow")
    run.add_argument("script", nargs="?", help="the training script")
    run.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")

    rep = sub.add_parser("report", help="merge the reports in DIR into one verdict: who never arrived",
                         description="Merge every rank's report and state in DIR (one dump_dir, or several "
                                     "nodes' dump_dirs copied together) into one verdict, root cause first, "
                                     "then each rank's report.  Where DIR holds none but DIR/c10d_observer does "
                                     "(the job's folder), that is read.  Exit code: 1 if a stuck call was "
                                     "found; 3 if none is stuck but calls were overdue and completed later "
                                     "(resolved); 0 if no call was ever overdue; 2 if DIR cannot be read or "
                                     "holds no report, state or torch dump.")
    rep.add_argument("dir", help="a dump_dir")
    rep.add_argument("--html", metavar="OUT.html",
                     help="also write one self-contained page: where every rank is in every group (the stuck "
                          "call and the culprits marked), the calls in flight on a timeline, the verdict")
    rep.add_argument("--json", action="store_true",
                     help="print the verdict as one JSON object (version 1: hangs, culprit_ranks, "
                          "culprits (each with its node, host, pid and the job's ids), ranks_reporting, ...)")
    rep.add_argument("--exclude", action="store_true",
                     help="print only the culprits' nodes, in Slurm's hostlist syntax (for sbatch --exclude "
                          "or scontrol's ExcNodeList; the node as the scheduler names it: "
                          "$C10D_OBSERVER_NODE_NAME, $SLURMD_NODENAME, Kubernetes' $NODE_NAME, else the host "
                          "name); an empty line when no culprit is known.  Exit code 0, or 2 as above.")

    watch = sub.add_parser("watch", help="a live view of a running job: where every rank is in every group",
                           description="Redraw, every second, the job's ranks x groups: each rank's call in "
                                       "flight on each group and for how long (! past the timeout), or the last "
                                       "it completed; then the overdue calls, the stragglers and the latest "
                                       "verdict.  The watchdogs sharing DIR write their ranks' positions while "
                                       "a view is open.  Ctrl-C ends it (exit 0); exit 2 if DIR is not a folder.")
    watch.add_argument("dir", help="the job's dump_dir")
    watch.add_argument("--interval", type=_duration, default=1.0, help="seconds between frames (default 1)")
    watch.add_argument("--once", action="store_true", help="print one frame and exit (scripts, logs)")

    demo = sub.add_parser("demo", help="spawn a few CPU ranks on gloo, hang one, show the detection")
    demo.add_argument("--ranks", type=int, default=4, help="number of ranks (default 4)")
    demo.add_argument("--culprit", type=int, default=None,
                      help="the rank that skips a collective (default 2, or the last rank where --ranks is 2)")
    demo.add_argument("--timeout", type=_duration, default=None,
                      help="the observer's timeout (default: none; the deadlines are learned from the steps before)")
    demo.add_argument("--dump-dir", help="where the reports, stacks and verdict go, kept afterwards (default: a "
                                         "temporary directory, removed when the demo ends)")

    sub.add_parser("capabilities", help="print what the installed torch offers, as JSON")
    return p


def _split_run(argv):
    """(run's own part, the script's arguments): everything after the script (or -m MODULE) is the
    script's, even when it looks like an option (argparse would take '--lr' for one of run's)."""
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "-m":
            return argv[:i + 2], argv[i + 2:]
        if a.startswith("-m") and len(a) > 2 and not a.startswith("--"):  # -mpkg.train
            return argv[:i + 1], argv[i + 1:]
        if a.startswith("-"):
            i += 1 if "=" in a or a in ("-h", "--help") else 2
            continue
        return argv[:i + 1], argv[i + 1:]
    return argv, []


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    rest = None
    if argv[:1] == ["run"]:
        argv, rest = _split_run(argv)
    args = build_parser().parse_args(argv)
    if rest is not None:
        args.args = rest
    if args.command == "run":
        return _run(args)
    if args.command == "report":
        return _print_report(args.dir, args.json, args.html, args.exclude)
    if args.command == "watch":
        from . import live
        return live.watch(args.dir, args.interval, args.once)
    if args.command == "demo":
        from . import demo
        return demo.main(args)
    if args.command == "capabilities":
        import json
        from . import capabilities
        print(json.dumps(capabilities(), indent=2, sort_keys=True))
        return 0
    return 2


def _run(args):
    import c10d_observer
    kw = {}
    for name in ("timeout", "poll_interval", "dump_dir", "source", "on_timeout"):
        value = getattr(args, name)
        if value is not None:
            kw[name] = value
    if args.signal is not None:
        from .config import parse_signal
        try:
            kw["signal"] = parse_signal(args.signal, "--signal")
        except ValueError as e:
            return _error(e)
    rest = ([args.script] if args.module and args.script is not None else []) + list(args.args)
    if rest[:1] == ["--"]:  # what follows goes to the script as it is, run's own option names included
        rest = rest[1:]
    else:
        ours = [a for a in rest if a.split("=", 1)[0] in RUN_OPTIONS]
        if ours:
            return _error("%s after the script would go to the script, not to run: put it before the script, "
                          "or pass the script's own after '--' (run train.py -- %s)" % (ours[0], ours[0]))
    if args.module is None:
        if args.script is None:
            return _error("run needs a script or -m MODULE (see c10d-observer run --help)")
        if not os.path.exists(args.script):
            return _error("no such script: %s" % args.script)
    from . import _autostart
    from . import config as _config
    from . import observer as _observer
    try:  # every setting checked now, before the script runs
        cfg = _config.resolve(check_source=_observer._check_source, **kw)
    except _config.SettingError as e:  # a bad C10D_OBSERVER_* variable: one line; the script runs unobserved
        cfg = _observer.Unobserved(str(e)) and None
    except (ValueError, TypeError) as e:  # a bad option of run's own: one line, not a traceback, exit 2
        return _error(e)
    if cfg is not None:
        # enabled once the script's process group exists, as under C10D_OBSERVER=1: a signal handler the
        # script installs at its top is then the one the observer's passes the signal on to
        unarm = _autostart.arm(kw)
        if _autostart.pth_installed():  # ranks the script starts itself (mp.spawn) are observed as this one
            _autostart.export(cfg)
            unwarn = lambda: None  # noqa: E731
        else:
            unwarn = _warn_on_spawn()
    else:
        unarm = unwarn = lambda: None  # noqa: E731
    try:
        if args.module is not None:
            sys.argv = [args.module] + rest  # runpy puts the module's path in argv[0]
            sys.path.insert(0, os.getcwd())
            runpy.run_module(args.module, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [args.script] + rest
            sys.path.insert(0, os.path.dirname(os.path.abspath(args.script)))
            runpy.run_path(args.script, run_name="__main__")
    finally:
        unwarn()
        unarm()
        c10d_observer.disable()
    return 0


def _warn_on_spawn():
    """Under run, ranks the script starts itself (torch.multiprocessing.spawn / start_processes) are new
    processes that never call enable(): say so once, with what to do.  Returns the undo."""
    try:
        import torch.multiprocessing as tmp
    except Exception:
        return lambda: None
    saved = {n: getattr(tmp, n) for n in ("spawn", "start_processes") if hasattr(tmp, n)}
    told = []

    def wrap(orig):
        def wrapper(*a, **kw):
            if not told:
                told.append(True)
                sys.stderr.write(
                    "c10d-observer: warning: the ranks this script starts with torch.multiprocessing.%s are not "
                    "watched (run enables the observer in its own process only): call c10d_observer.enable() "
                    "at the start of the function each rank runs, or launch the ranks with torchrun "
                    "-m c10d_observer run\n" % orig.__name__)
            return orig(*a, **kw)
        return wrapper

    for n, f in saved.items():
        setattr(tmp, n, wrap(f))

    def undo():
        for n, f in saved.items():
            setattr(tmp, n, f)
    return undo


# run's own options: given after the script they would silently go to the script
RUN_OPTIONS = ("--timeout", "--poll-interval", "--dump-dir", "--source", "--on-timeout", "--signal")


def _print_report(directory, as_json=False, html_path=None, exclude=False):
    """``report DIR``: the verdict (the record merged while the job ran, with what happened after; else made
    now), then the per-rank reports.  Output to a closed pipe (``| head``) ends quietly."""
    try:
        return _report_to(directory, as_json, html_path, exclude)
    except BrokenPipeError:
        try:  # the reader left: nothing more to say, and no traceback at exit either
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return 0


def _report_to(directory, as_json, html_path, exclude=False):
    from . import verdict as _verdict
    try:
        v, problems, read = _verdict.load(directory, DEFAULT_DIR)
        if read != directory:  # the job's folder: its dump_dir is inside
            sys.stderr.write("c10d-observer report: nothing in %s; reading %s\n" % (directory, read))
        reports, _ = _report.load_dir(read)
    except _report.ReportError as e:
        # an empty or wrong folder is not a healthy job: a CI check must not read it as "no stuck call"
        sys.stderr.write("c10d-observer report: error: %s\n" % e)
        return 2
    if html_path:
        from . import page
        try:
            docs = _verdict.record_documents(read)
            if docs is None:
                docs, _ = _verdict.load_docs(read, torch_dumps=True)
            page.write(html_path, docs, v, read)
        except OSError as e:
            sys.stderr.write("c10d-observer report: error: --html %s: %s\n" % (html_path, e))
            return 2
        sys.stderr.write("c10d-observer report: page written to %s\n" % html_path)
    if exclude:  # a script's input: the nodes, nothing else; whether a hang was found is in --json
        sys.stdout.write(_verdict.culprit_nodes(v) + "\n")
        sys.stdout.flush()
        return 0
    if as_json:
        import json
        out = _verdict.public(v)
        out["unreadable"] = list(problems)
        sys.stdout.write(json.dumps(out, indent=1, sort_keys=True) + "\n")
    else:
        sys.stdout.write(_verdict.format_text(v, problems) + "\n")
        sys.stdout.write("\nper-rank reports:\n")
        sys.stdout.write(_report.summarize(reports) + "\n")
    sys.stdout.flush()
    return v.exit_code
