"""What every benchmark script shares: where results go, one way to summarise samples, one way to print a
table, and how a measured child process is started.  Imports no torch.

    from _harness import summary, table, write_json   # after this import the checkout's package is importable

Statistics: the median is ``statistics.median`` (the mean of the two middle values of an even count); every
other percentile is the nearest rank (the smallest value with at least q % of the samples at or below it).
Every figure in ``results/`` and the docs from these scripts is computed that way, with one difference in
files written before 2026-11-24: ``overhead.py`` took rank ``round(q n / 100 + 0.5)``, one rank higher
where ``q n / 100`` is an odd integer (11 of the 407 stored p90/p99 cells: the p99s at n = 500 in
``overhead_w1_*.json``, none quoted in the README or the docs), and ``detection.py`` took the value at
index ``round((n - 1) q / 100)`` for every percentile, the median included (``detection.json`` is rerun).
"""
from __future__ import print_function

import datetime
import json
import math
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)  # the package from this checkout, not an installed copy

SUMMARY = ("n", "min", "median", "p90", "p99", "mean", "max")


# -- statistics --------------------------------------------------------------------------------------------
def percentile(sorted_vals, q):
    """Nearest-rank percentile ``q`` (0-100) of an already sorted list; nan if it is empty."""
    if not sorted_vals:
        return float("nan")
    k = max(0, min(len(sorted_vals) - 1, int(math.ceil(q / 100.0 * len(sorted_vals) - 1e-9)) - 1))
    return sorted_vals[k]


def summary(values, scale=1.0, suffix="", keys=SUMMARY, keep_all=False, prefix=""):
    """``{prefix + key + suffix: value * scale}`` for ``keys`` out of n, min, median, mean, max and pNN (any
    NN); ``n`` takes no prefix, suffix or scale; ``all`` (with ``keep_all``) holds the values as given.  None for no
    values.  The statistics are computed on the values as given, then scaled."""
    s = sorted(values)
    if not s:
        return None
    out = {}
    for k in keys:
        if k == "n":
            out["n"] = len(s)
            continue
        if k == "median":
            v = statistics.median(s)
        elif k == "mean":
            v = sum(s) / float(len(s))
        elif k == "min":
            v = s[0]
        elif k == "max":
            v = s[-1]
        elif k.startswith("p") and k[1:].isdigit():
            v = percentile(s, float(k[1:]))
        else:
            raise ValueError("summary(keys=): %r is not one of n, min, median, mean, max, pNN" % (k,))
        out[prefix + k + suffix] = v * scale
    if keep_all:
        out["all"] = list(values)
    return out


def median(values):
    return statistics.median(values)


def ratio(a, b):
    """a / b, or None where either is missing or b is 0."""
    if a is None or b is None or not b:
        return None
    return a / b


# -- formatting and tables ---------------------------------------------------------------------------------
def fmt(v, spec="%.1f", none="-"):
    """``spec % v``, or ``none`` for None."""
    return none if v is None else spec % v


def table(head, rows, align="", rule_after=0, title=None, file=None):
    """Print ``rows`` (sequences of cells; None prints as '-') under ``head``, two spaces apart; ``align``
    has an 'l' (left) or 'r' (right, the default) per column; with ``rule_after`` N, ' | ' stands after the
    first N columns and a dashed line under the head."""
    file = file or sys.stdout
    if title:
        print(title, file=file)
    cells = [["-" if c is None else str(c) for c in r] for r in rows]
    width = [max([len(h)] + [len(r[i]) for r in cells if i < len(r)]) for i, h in enumerate(head)]

    def line(r):
        parts = [c.ljust(width[i]) if align[i:i + 1] == "l" else c.rjust(width[i]) for i, c in enumerate(r)]
        if rule_after:
            return "  ".join(parts[:rule_after]) + " | " + "  ".join(parts[rule_after:])
        return "  ".join(parts).rstrip()

    first = line(list(head))
    print(first, file=file)
    if rule_after:
        print("-" * len(first), file=file)
    for r in cells:
        print(line(r), file=file)


# -- results -----------------------------------------------------------------------------------------------
def write_json(path, obj):
    """Write ``obj`` as JSON to ``path`` (its folder is created) and say so."""
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        os.makedirs(d)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    print("wrote %s" % path)


def today():
    return datetime.date.today().isoformat()


def loadavg():
    try:
        return list(os.getloadavg())
    except (AttributeError, OSError):
        return None


def machine():
    return {"processor": platform.processor(), "uname": list(platform.uname()),
            "platform": platform.platform(), "cpu_count": os.cpu_count()}


# -- child processes ---------------------------------------------------------------------------------------
def child_env(**changes):
    """This process's environment with the checkout first on PYTHONPATH; ``changes`` set variables, a None
    value removes one."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    for k, v in changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


def free_port():
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


# the line of a rank whose new_group is not the group the others made at its place (sources/groups.py SameGroup)
SAYS_APART = "is not the same group on every rank"


def says_apart(log_path):
    """Whether a rank's log has SAYS_APART's line: a job that makes its groups alike on every rank never does."""
    try:
        with open(log_path, errors="replace") as f:
            return any(SAYS_APART in line for line in f)
    except OSError:
        return False


def end_sessions(procs):
    """End each process started with ``start_new_session`` that is still running, with its session (a stopped
    one continued first, so that SIGKILL is not left pending), and reap them all."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGCONT)
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
        p.wait()


def run_logged(cmd, env, timeout, log_path, verbose=False, cwd=ROOT):
    """Run ``cmd`` in a session of its own, output to ``log_path``; return (rc, seconds).  Past ``timeout``
    its process group (this command's processes only) is ended and rc is 124."""
    t0 = time.time()
    with open(log_path, "w") as log:
        p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(p.pid, sig)
                    p.wait(timeout=10)
                    break
                except OSError:
                    break
                except subprocess.TimeoutExpired:
                    continue
            rc = 124
    if rc == 124:
        with open(log_path, "a") as log:
            log.write("\n[benchmarks] ran past %.0f s: ended\n" % timeout)
    if verbose:
        with open(log_path) as f:
            sys.stdout.write(f.read())
    return rc, time.time() - t0
