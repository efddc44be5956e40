"""torch's collective ops as the observer names them: the ProcessGroup methods that issue one, the tensor
whose size must agree across a call's ranks, torch's op names normalised, and what a flight-recorder entry says
(its op, its size).  Part of ``compat``: callers read these names through ``c10d_observer.compat``."""

# ProcessGroup methods that issue a collective or p2p op, in any release (1.8 → 2.15), and the op each is.
PG_METHODS = (
    ("allreduce", "all_reduce"), ("broadcast", "broadcast"), ("reduce", "reduce"),
    ("allgather", "all_gather"), ("_allgather_base", "all_gather_into_tensor"),
    ("all_gather_single", "all_gather_single"), ("gather", "gather"), ("scatter", "scatter"),
    ("reduce_scatter", "reduce_scatter"), ("_reduce_scatter_base", "reduce_scatter_tensor"),
    ("reduce_scatter_single", "reduce_scatter_single"), ("alltoall", "all_to_all"),
    ("alltoall_base", "all_to_all_single"), ("all_to_all_single", "all_to_all_single"),
    ("barrier", "barrier"), ("monitored_barrier", "monitored_barrier"),
    ("allreduce_coalesced", "all_reduce_coalesced"), ("allgather_coalesced", "all_gather_coalesced"),
    ("allgather_into_tensor_coalesced", "all_gather_into_tensor_coalesced"),
    ("reduce_scatter_tensor_coalesced", "reduce_scatter_tensor_coalesced"),
    ("all_gather_single_coalesced", "all_gather_single_coalesced"),
    ("reduce_scatter_single_coalesced", "reduce_scatter_single_coalesced"),
    ("gather_single", "gather_single"),
    ("send", "send"), ("recv", "recv"), ("recv_anysource", "recv_anysource"),
)
P2P_METHODS = {"send": 1, "recv": 1, "recv_anysource": None}  # method -> index of the peer argument

# Module-level functions that issue several ops under one user-facing name.
COMPOSITE_APIS = ("all_gather_object", "gather_object", "broadcast_object_list", "scatter_object_list",
                  "send_object_list", "recv_object_list", "batch_isend_irecv")

# The tensor whose size must agree across the ranks of a call (the call's size signature, channel.py):
# "in" or "out", and for the patch source the index of the ProcessGroup method's argument that holds it.
# all_to_all and barriers have none (splits may differ; no tensor).
SIZE_TENSOR = {
    "all_reduce": ("in", 0), "broadcast": ("in", 0), "reduce": ("in", 0), "all_reduce_coalesced": ("in", 0),
    "send": ("in", 0), "recv": ("out", 0), "recv_anysource": ("out", 0),
    "all_gather": ("in", 1), "all_gather_into_tensor": ("in", 1), "gather": ("in", 1),
    "all_gather_coalesced": ("in", 1), "all_gather_into_tensor_coalesced": ("in", 1),
    "scatter": ("out", 0), "reduce_scatter": ("out", 0), "reduce_scatter_tensor": ("out", 0),
    "reduce_scatter_tensor_coalesced": ("out", 0),
}

# The argument of a ProcessGroup method that holds a rooted op's root: its options (``rootRank``), or the
# root itself in the overloads pg.broadcast(tensor, root) and pg.reduce(tensor, root, op).
ROOT_ARG = {"broadcast": 1, "reduce": 1, "gather": 2, "scatter": 2}


def dtype_codes():
    """{torch dtype: channel dtype code} for the dtypes this torch has."""
    import torch
    from .. import channel as _ch
    return {getattr(torch, n): c for c, n in enumerate(_ch.DTYPES)
            if c and isinstance(getattr(torch, n, None), torch.dtype)}


# torch's op names (HookOpName of the pre/post hooks, flight-recorder profiling names, c10d OpType strings)
# -> the observer's op names (channel.OPS)
OP_ALIASES = {
    "allreduce": "all_reduce", "allgather": "all_gather", "allgather_base": "all_gather_into_tensor",
    "_allgather_base": "all_gather_into_tensor", "allgather_coalesced": "all_gather_coalesced",
    "allgather_into_tensor_coalesced": "all_gather_into_tensor_coalesced",
    "allreduce_coalesced": "all_reduce_coalesced", "alltoall": "all_to_all", "alltoall_base": "all_to_all_single",
    "reduce_scatter_base": "reduce_scatter_tensor", "_reduce_scatter_base": "reduce_scatter_tensor",
    "recvanysource": "recv_anysource", "_reduce_oop": "reduce", "_broadcast_oop": "broadcast",
    "_all_gather_base": "all_gather_into_tensor", "all_reduce_barrier": "barrier",
}
# ProcessGroupNCCL's name for a coalesced block of one collective kind: "nccl:" + its OpType + "_coalesced"
_NCCL_COALESCED = {"ALLGATHER": "all_gather_into_tensor_coalesced", "REDUCE_SCATTER": "reduce_scatter_tensor_coalesced",
                   "ALLREDUCE": "all_reduce_coalesced"}


def op_name(torch_name):
    """Normalise one of torch's op names (``ALLREDUCE``, ``gloo:all_reduce``, ``nccl:_allgather_base``,
    ``nccl:send 0->1``, ``nccl:ALLGATHER_coalesced``) to the name users write."""
    n = str(torch_name)
    if ":" in n:
        n = n.split(":", 1)[1].split(" ", 1)[0]  # "send 0->1": the peers are the stream's business
    else:
        n = n.split(".")[-1]
    if n.endswith("_coalesced") and n[:-len("_coalesced")] in _NCCL_COALESCED:
        return _NCCL_COALESCED[n[:-len("_coalesced")]]
    n = n.lower()
    return OP_ALIASES.get(n, n)


def entry_op(e):
    """The op of a flight-recorder entry, as users write it (``all_gather_into_tensor``, not
    ``nccl:_all_gather_base``; ``all_to_all_single`` where NCCL names both all_to_all variants alike)."""
    op = op_name(e.get("profiling_name", "") or "unknown")
    if op == "all_to_all" and len(e.get("input_sizes") or ()) == 1 and "nccl" in str(e.get("profiling_name")):
        op = "all_to_all_single"
    return op


def entry_size(e):
    """``"<numel> x <dtype>"`` of a flight-recorder entry's tensor that must agree across ranks (SIZE_TENSOR),
    or None: what the verdict compares to find a desync."""
    side = SIZE_TENSOR.get(entry_op(e), (None,))[0]
    tensor = entry_tensor(e, side) if side is not None else None
    return "%d x %s" % tensor if tensor else None


def entry_tensor(e, side="in"):
    """(numel, dtype name as in channel.DTYPES) of a flight-recorder entry's first input (``side="in"``) or
    output tensor, or None.  The dtype falls back to the other side's (recorded readings lack
    ``output_dtypes``; a collective's tensors share one dtype)."""
    from .. import channel as _ch
    which = "input" if side == "in" else "output"
    other = "output" if side == "in" else "input"
    sizes = e.get(which + "_sizes") or []
    dtypes = e.get(which + "_dtypes") or e.get(other + "_dtypes") or []
    if not sizes or not isinstance(sizes[0], list) or not dtypes:
        return None
    numel = 1
    for n in sizes[0]:
        numel *= int(n)
    return numel, _ch.SCALAR_TYPES.get(str(dtypes[0]), str(dtypes[0]).lower())
