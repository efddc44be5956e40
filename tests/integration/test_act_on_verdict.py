"""Issue 28: what a launcher and a scheduler act on.  Under on_timeout="abort" every rank of a hang ends
with HANG_EXIT_CODE (93), not a crash's code; the verdict carries each culprit's node as the scheduler names
it and the job's ids; ``report DIR --exclude`` prints the nodes to leave out, in Slurm's syntax.
Real gloo ranks; the Slurm variables are set in their environment as srun would (no Slurm runs here)."""
import json
import os
import subprocess
import sys

import c10d_observer
from harness import ROOT, wait_until


def _report(dump_dir, *args):
    return subprocess.run([sys.executable, "-m", "c10d_observer", "report", dump_dir] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          env=dict(os.environ, PYTHONPATH=ROOT))


def test_under_abort_every_rank_exits_93_and_the_verdict_names_the_culprits_node(job_factory):
    env = {"SLURMD_NODENAME": "gpu07", "SLURM_JOB_ID": "4242"}
    job = job_factory("skip", 3, culprit=2, step=1, timeout=1.0, on_timeout="abort", env=env)
    codes = job.finish(timeout=120)
    log = job.log_text()
    # the culprit stalls in Python, the others wait in all_reduce (or raise there once the culprit ended,
    # under gloo): each ends with the code that says "a hang was found", never SIGTERM's or a crash's
    assert codes == [c10d_observer.HANG_EXIT_CODE] * 3 == [93] * 3, (codes, log)
    assert "rank 2: a collective hang was found and this rank is its culprit; ending this rank with exit code 93" \
        in log, log
    assert "sending SIGTERM" not in log, log
    wait_until(lambda: len([n for n in os.listdir(job.dump_dir) if n.startswith("end-rank")]) == 3, 30,
               "every rank's end\n" + log)

    out = _report(job.dump_dir, "--json")
    assert out.returncode == 1, out.stdout + out.stderr
    v = json.loads(out.stdout)
    assert v["culprit_ranks"] == [2], v["summary"]
    [c] = v["culprits"]
    assert (c["rank"], c["node"], c["node_from"], c["slurm_job_id"]) == (2, "gpu07", "SLURMD_NODENAME", "4242"), c
    assert c["host"] and c["pid"] == job.procs[2].pid, c
    ends = [json.load(open(os.path.join(job.dump_dir, n))) for n in os.listdir(job.dump_dir) if n.startswith("end-")]
    assert all("exit with code 93" in e["exit_reason"] for e in ends), [e["exit_reason"] for e in ends]
    # the culprit ended first (a launcher's first failure, torchrun's Root Cause), the waiting ranks after.
    # Each end document is written when its rank's watchdog next looks (every poll: 0.1 s at timeout 1 s), so
    # the documents order the ends to within a poll (CI once saw the culprit's written 25 ms after rank 1's)
    ended_at = {e["rank"]: e["written_at"] for e in ends}
    assert ended_at[2] < min(ended_at[0], ended_at[1]) + 0.1, ended_at

    out = _report(job.dump_dir, "--exclude")
    assert (out.returncode, out.stdout) == (0, "gpu07\n"), out
    text = _report(job.dump_dir).stdout
    assert "culprit nodes (SLURMD_NODENAME): gpu07" in text, text


def test_under_abort_a_rank_whose_call_is_not_overdue_yet_when_the_culprit_ends_still_exits_93(job_factory):
    # rank 1 reaches the call half a timeout after rank 0: when the verdict ends the culprit, rank 1's call is
    # not past the deadline yet, and under gloo it raises at once (its peer is gone).  Its watchdog armed it when
    # it answered the gather (before the merge), and the rank takes that arm at its end if its helper had not:
    # the end is the hang's (93), not a crash's (1), and its end document says the observer armed it
    job = job_factory("skip", 3, culprit=2, step=1, timeout=1.0, on_timeout="abort", late={1: 0.5})
    codes = job.finish(timeout=120)
    log = job.log_text()
    assert codes == [93] * 3, (codes, log)
    wait_until(lambda: len([n for n in os.listdir(job.dump_dir) if n.startswith("end-rank")]) == 3, 30,
               lambda: "every rank's end\n" + job.log_text())
    ends = {}
    for n in os.listdir(job.dump_dir):
        if n.startswith("end-"):
            e = json.load(open(os.path.join(job.dump_dir, n)))
            ends[e["rank"]] = e["exit_reason"]
    assert all("exit with code 93" in why for why in ends.values()), ends
    out = _report(job.dump_dir, "--json")
    assert json.loads(out.stdout)["culprit_ranks"] == [2], out.stdout


def test_exclude_prints_an_empty_line_when_no_call_was_overdue(job_factory):
    # nobody skips; a healthy job waits for nothing, so it runs at the defaults users get (a learned floor of
    # 10 s, not the test times' 2 s, which a loaded machine could reach)
    job = job_factory("skip", 2, culprit=-1, step=1, timeout=30.0, timing=None)
    assert job.finish() == [0, 0], job.log_text()
    out = _report(job.dump_dir, "--exclude")
    assert (out.returncode, out.stdout) == (0, "\n"), out
