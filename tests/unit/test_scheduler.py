"""The node a scheduler names (scheduler.py), its hostlist syntax, and the culprits a verdict carries."""
import os
import shutil
import subprocess

import pytest

from c10d_observer import scheduler, verdict
from c10d_observer.documents import RankDoc


@pytest.mark.parametrize("names, text", [
    (["gpu03", "gpu04", "gpu05", "gpu07", "login1"], "gpu[03-05,07],login1"),
    (["n1", "n10", "n2"], "n[1-2,10]"),
    (["gpu09", "gpu10", "gpu3"], "gpu3,gpu[09-10]"),
    (["node7.cluster.local"], "node7.cluster.local"),
    (["a", "a", "b"], "a,b"),
    ([], ""),
])
def test_hostlist_writes_slurms_syntax_and_reads_back(names, text):
    assert scheduler.hostlist(names) == text
    assert sorted(scheduler.expand(text)) == sorted(set(names))


@pytest.mark.skipif(shutil.which("scontrol") is None, reason="no Slurm client here (scontrol; .ci/run installs "
                                                              "Debian's slurm-client)")
def test_slurm_expands_our_hostlist_to_the_same_names(tmp_path):
    """Slurm's own parser (scontrol show hostnames reads no controller; it needs a config file to start)."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=test\nSlurmctldHost=localhost\n")
    names = ["gpu03", "gpu04", "gpu05", "gpu07", "gpu10", "login1", "n9", "n10"]
    out = subprocess.run(["scontrol", "show", "hostnames", scheduler.hostlist(names)], stdout=subprocess.PIPE,
                         universal_newlines=True, check=True,
                         env=dict(os.environ, SLURM_CONF=str(conf))).stdout.split()
    assert sorted(out) == sorted(names)


def test_the_node_comes_from_the_scheduler_first_then_the_host_name():
    env = {"C10D_OBSERVER_NODE_NAME": "mine", "SLURMD_NODENAME": "gpu07", "NODE_NAME": "k8s-node-3",
           "KUBERNETES_SERVICE_HOST": "10.0.0.1", "SLURM_JOB_ID": "4242", "TORCHELASTIC_RUN_ID": "r1"}
    assert scheduler.info(env) == {"node": "mine", "node_from": "C10D_OBSERVER_NODE_NAME",
                                   "slurm_job_id": "4242", "torchelastic_run_id": "r1"}
    del env["C10D_OBSERVER_NODE_NAME"]
    assert scheduler.node(env) == ("gpu07", "SLURMD_NODENAME")
    del env["SLURMD_NODENAME"]
    assert scheduler.node(env) == ("k8s-node-3", "NODE_NAME")
    del env["KUBERNETES_SERVICE_HOST"]  # NODE_NAME outside a pod means something else
    name, source = scheduler.node(env)
    assert source == "hostname" and name


def test_a_verdict_carries_each_culprits_node_and_the_jobs_ids():
    sched = {"node": "gpu07", "node_from": "SLURMD_NODENAME", "slurm_job_id": "4242"}
    docs = {r: RankDoc("state", r, 3, "host%d" % r, 100 + r, "job", 10.0, 1.0, scheduler=sched if r == 2 else None)
            for r in range(3)}
    v = {"culprit_ranks": [2, 1]}
    v["culprits"] = [verdict.culprit_entry(r, docs[r]) for r in v["culprit_ranks"]]
    assert v["culprits"][0] == {"rank": 2, "node": "gpu07", "node_from": "SLURMD_NODENAME", "host": "host2",
                                "pid": 102, "slurm_job_id": "4242"}
    assert v["culprits"][1]["node"] == "host1" and v["culprits"][1]["node_from"] == "hostname"
    assert verdict.culprit_nodes(v) == ""  # no stuck call: nothing to act on
    v["hangs"] = [{"level": "hard", "outcome": {"state": "stuck"}}]
    assert verdict.culprit_nodes(v) == "gpu07,host1"
    for soft in ({"level": "soft"}, {"level": "soft", "held_until": 1e10}, {"level": "hard", "outcome": {"state": "resolved"}}):
        v["hangs"] = [soft]  # soft verdicts inform: a scheduler excludes no node for them, nor for a resolved hang
        assert verdict.culprit_nodes(v) == "", soft
