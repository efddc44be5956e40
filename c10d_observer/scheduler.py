"""Where a rank runs, as the job's scheduler knows it, and Slurm's hostlist syntax.  No torch.

A verdict names the culprit's host; a scheduler excludes or taints a *node*, by its own name for it, which
is not always the host name (Slurm's ``NodeName`` can differ from ``hostname``; a Kubernetes pod's host
name is the pod's).  ``info`` is read once in each rank at ``enable()`` and travels in every document the
rank's watchdog writes; ``report DIR --exclude`` prints the culprits' nodes with ``hostlist``.

The node, first found of:

==============================  ================================================================
``C10D_OBSERVER_NODE_NAME``     set by the user (any scheduler)
``SLURMD_NODENAME``             Slurm, in every task it starts
``NODE_NAME``                   Kubernetes, in a pod (``KUBERNETES_SERVICE_HOST`` set), where the pod
                                spec sets it from the downward API (``fieldRef: spec.nodeName``)
the host name                   ``socket.gethostname()``
==============================  ================================================================
"""
import os
import re
import socket

NODE_SOURCES = ("C10D_OBSERVER_NODE_NAME", "SLURMD_NODENAME", "NODE_NAME")
JOB_IDS = (("slurm_job_id", "SLURM_JOB_ID"), ("torchelastic_run_id", "TORCHELASTIC_RUN_ID"))


def node(env=None):
    """(the node's name, where it came from: one of ``NODE_SOURCES`` or ``"hostname"``)."""
    env = os.environ if env is None else env
    for var in NODE_SOURCES:
        if var == "NODE_NAME" and not env.get("KUBERNETES_SERVICE_HOST"):
            continue  # NODE_NAME means the pod's node only inside a pod
        value = (env.get(var) or "").strip()
        if value:
            return value, var
    return socket.gethostname(), "hostname"


def info(env=None):
    """What the rank's documents carry: ``node``, ``node_from`` and the job's ids that are set."""
    env = os.environ if env is None else env
    name, source = node(env)
    out = {"node": name, "node_from": source}
    for key, var in JOB_IDS:
        if env.get(var):
            out[key] = env[var]
    return out


_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def hostlist(names):
    """``names`` in Slurm's hostlist syntax (what ``--exclude`` and ``ExcNodeList`` take): names that differ
    only in a trailing number share brackets, ``gpu[03-05,07],login1``; zero-padded numbers keep their width.
    Sorted, duplicates once; an empty string for no names."""
    groups, single = {}, set()
    for name in set(n for n in names if n):
        m = _NUMBERED.match(name)
        if not m or re.search(r"[\[\],]", name):
            single.add(name)
            continue
        prefix, digits = m.groups()
        width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
        groups.setdefault((prefix, width), []).append(int(digits))
    for (prefix, width) in [k for k in groups if k[1]]:  # gpu10 reads the same in gpu[09-10]
        plain = groups.get((prefix, 0), [])
        keep = [n for n in plain if len(str(n)) != width]
        groups[(prefix, width)] += [n for n in plain if len(str(n)) == width]
        if (prefix, 0) in groups:
            groups[(prefix, 0)] = keep
    parts = sorted(single)
    for (prefix, width), numbers in sorted(groups.items()):
        numbers = sorted(set(numbers))
        if not numbers:
            continue
        if len(numbers) == 1:
            parts.append("%s%0*d" % (prefix, width, numbers[0]))
            continue
        runs, first, last = [], numbers[0], numbers[0]
        for n in numbers[1:] + [None]:
            if n is not None and n == last + 1:
                last = n
                continue
            runs.append("%0*d" % (width, first) if first == last else "%0*d-%0*d" % (width, first, width, last))
            if n is not None:
                first = last = n
        parts.append("%s[%s]" % (prefix, ",".join(runs)))
    return ",".join(sorted(parts))


def expand(text):
    """The names of a hostlist (the inverse of ``hostlist``, for the forms it writes)."""
    out = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", text or ""):
        m = re.match(r"^(.*)\[(.*)\]$", part)
        if not m:
            out.append(part)
            continue
        prefix, body = m.groups()
        for r in body.split(","):
            lo, _, hi = r.partition("-")
            width = len(lo) if lo.startswith("0") and len(lo) > 1 else 0
            for n in range(int(lo), int(hi or lo) + 1):
                out.append("%s%0*d" % (prefix, width, n))
    return out
