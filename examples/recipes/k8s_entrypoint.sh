#!/bin/bash
# Container entrypoint for Kubernetes: torchrun under c10d-observer.  A hung collective ends every rank
# (on_timeout=abort: each exits 93, c10d_observer.HANG_EXIT_CODE); this pod then exits with HANG_EXIT
# (default 93) and says the culprit ranks' nodes in its termination message; any other failure keeps
# torchrun's exit code.  Arguments go to torchrun:
#   k8s_entrypoint.sh --nproc_per_node=8 train.py
# Needs NODE_NAME from the downward API in the pod spec (docs/recipes.md, "Kubernetes").
export C10D_OBSERVER=1
export C10D_OBSERVER_ON_TIMEOUT=abort
export C10D_OBSERVER_DIR=${C10D_OBSERVER_DIR:-/var/run/c10d_observer}
PY=${PY:-python}

torchrun "$@"
rc=$?
[ "$rc" -eq 0 ] && exit 0
nodes=$("$PY" -m c10d_observer report "$C10D_OBSERVER_DIR" --exclude 2>/dev/null)
if [ -z "$nodes" ]; then
    exit "$rc"                      # no verdict with a culprit: a crash, an OOM, ... as torchrun said
fi
"$PY" -m c10d_observer report "$C10D_OBSERVER_DIR" | head -n 12 >&2      # into `kubectl logs`
msg="collective hang; culprit nodes: $nodes (verdict in $C10D_OBSERVER_DIR on this pod)"
echo "$msg" >&2
[ -w /dev/termination-log ] && echo "$msg" > /dev/termination-log       # `kubectl describe pod`
exit "${HANG_EXIT:-93}"
