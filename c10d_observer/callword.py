"""The op word a slot of the channel holds for each call: what the call was, written once.

Bits 0-7: the op (``OPS``); 8-15: the user-facing API that issued it, where that differs (``APIS``);
16-31: the root of a rooted op (broadcast, reduce, gather, scatter: its rank in the group, plus one, modulo
2**16; 0 where not known); 32-55: the element count modulo 2**24 and 56-62: the dtype (``DTYPES``) of the
tensor whose size must agree across the call's ranks (the size signature; 0 where not known).  Every writer builds the word from
the names below: ``encode_op`` / ``encode_sig`` where a call is not on the training's call path (the
flight-recorder reader), and on the call path (sources/patch.py, pg_hooks.py, funcol.py) the same
expression inlined with these shifts and masks bound as locals.  tests/unit/test_callword.py checks that
no other module writes the layout's numbers, and each writer's word against ``decode_op`` /
``decode_sig``.
"""

API_SHIFT = 8  # the API code's place in the word
ROOT_SHIFT = 16  # the root's place in the word (the root plus one: 0 is "not known")
SIG_SHIFT = 32  # the size signature's place in the word
DTYPE_SHIFT = 24  # the dtype code's place in the signature
NUMEL_MASK = 0xFFFFFF  # the element count, modulo 2**24
DTYPE_MASK = 0x7F
OP_MASK = API_MASK = 0xFF
ROOT_MASK = 0xFFFF
ROOTED = ("broadcast", "reduce", "gather", "scatter")  # the ops whose ranks must agree on a root

# Op names, by code.  The low 16 bits of a slot's op word hold the op; the next 16 bits the user-facing API
# that issued it, when that differs (all_gather_object issues two all_gathers, for example).
OPS = (
    "unknown",
    "all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "gather", "scatter",
    "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "barrier",
    "monitored_barrier", "send", "recv", "recv_anysource",
    "all_reduce_coalesced", "all_gather_coalesced", "all_gather_into_tensor_coalesced",
    "reduce_scatter_tensor_coalesced", "coalesced", "broadcast_coalesced", "verify_params",
    "all_gather_single", "reduce_scatter_single", "all_gather_single_coalesced",
    "reduce_scatter_single_coalesced", "gather_single",
    "new_group",  # a group's making, where its ranks wait for each other (sources/groups.py)
)
APIS = (
    "",
    "all_gather_object", "gather_object", "broadcast_object_list", "scatter_object_list",
    "send_object_list", "recv_object_list", "batch_isend_irecv", "ddp_gradient_allreduce",
    "ddp_sync_module_states", "isend", "irecv", "funcol",
)
# The op word's bits 32-62 hold the call's size signature, where the source knows it: the dtype (by code,
# bits 56-62) and the element count modulo 2**24 (bits 32-55) of the tensor that must agree across the
# ranks of the call (the input of all_reduce, broadcast, all_gather; the output of scatter and
# reduce_scatter; none for all_to_all, whose splits may differ).  0: not known.
MEMBERS, MEMBERS_DIGEST = "members", "members_digest"
DTYPES = (
    "unknown", "float32", "float64", "float16", "bfloat16", "uint8", "int8", "int16", "int32", "int64",
    "bool", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64",
    # not dtypes: the members of the group a ``new_group`` makes (sources/groups.py), which must agree across
    # the world's ranks: a mask of them where the world has at most 24 ranks, else a digest (``encode_members``)
    MEMBERS, MEMBERS_DIGEST,
)
DTYPE_CODES = {name: code for code, name in enumerate(DTYPES)}
# c10 ScalarType names (flight-recorder entries) -> DTYPES
SCALAR_TYPES = {"Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16",
                "Byte": "uint8", "Char": "int8", "Short": "int16", "Int": "int32", "Long": "int64",
                "Bool": "bool", "ComplexFloat": "complex64", "ComplexDouble": "complex128",
                "Float8_e4m3fn": "float8_e4m3fn", "Float8_e5m2": "float8_e5m2", "UInt16": "uint16",
                "UInt32": "uint32", "UInt64": "uint64"}
_FIRST_MEMBERS = DTYPE_CODES[MEMBERS]  # the codes from here on are a group's members, not dtypes
OP_CODES = {name: code for code, name in enumerate(OPS)}
API_CODES = {name: code for code, name in enumerate(APIS)}


def encode_op(op, api=""):
    return OP_CODES.get(op, 0) | (API_CODES.get(api, 0) << API_SHIFT)


def decode_op(word):
    op = word & OP_MASK
    api = (word >> API_SHIFT) & API_MASK
    return (OPS[op] if op < len(OPS) else "unknown"), (APIS[api] if api < len(APIS) else "")


def encode_sig(dtype_code, numel):
    """The size-signature bits of an op word (0 when the dtype is not known)."""
    return ((dtype_code & DTYPE_MASK) << DTYPE_SHIFT | (numel & NUMEL_MASK)) << SIG_SHIFT if dtype_code > 0 else 0


def encode_root(root):
    """The root bits of an op word (``root``: the root's rank in the group; None: not known)."""
    return ((root + 1) & ROOT_MASK) << ROOT_SHIFT if root is not None and root >= 0 else 0


def encode_members(ranks, world_size):
    """The size-signature bits of a group's making: its members (global ranks) as a mask of 24 bits where the
    world has at most 24 ranks, else 24 bits of their CRC-32.  Two ranks that make different groups at one
    place of the world's making stream differ here (verdict: a desync of sizes)."""
    ranks = sorted(set(int(r) for r in ranks))
    if world_size <= 24:
        return encode_sig(DTYPE_CODES[MEMBERS], sum(1 << r for r in ranks))
    return encode_sig(DTYPE_CODES[MEMBERS_DIGEST], members_digest(ranks))


def members_digest(ranks):
    """The 24 bits a group's making carries of its members past 24 ranks (their CRC-32; the text shows them as
    ``members of digest %06x``): the verdict digests the groups the documents show to learn whose they are."""
    import zlib
    return zlib.crc32(",".join(map(str, sorted(set(int(r) for r in ranks)))).encode()) & NUMEL_MASK


def _members_text(code, numel):
    if DTYPES[code] == MEMBERS:
        from .text import rank_list
        return "members %s" % rank_list([r for r in range(24) if numel >> r & 1]).split(" ", 1)[-1]
    return "members of digest %06x" % numel


def decode_root(word):
    """The root's rank in the group (modulo 2**16) of an op word, or None where not known."""
    r = (word >> ROOT_SHIFT) & ROOT_MASK
    return r - 1 if r else None


def decode_sig(word):
    """``"<numel> x <dtype>"`` of an op word's size signature (numel modulo 2**24), with ``", root <r>"``
    where the word has a root; None where it has neither."""
    sig = (word >> SIG_SHIFT) & (DTYPE_MASK << DTYPE_SHIFT | NUMEL_MASK)
    root = decode_root(word)
    text = None
    if sig:
        code = sig >> DTYPE_SHIFT
        if _FIRST_MEMBERS <= code < len(DTYPES):
            text = _members_text(code, sig & NUMEL_MASK)
        else:
            text = "%d x %s" % (sig & NUMEL_MASK, DTYPES[code] if code < len(DTYPES) else "dtype%d" % code)
    if root is not None:
        text = ("%s, root %d" % (text, root)) if text else "root %d" % root
    return text


def signature(word):
    """(op code, dtype code, size bucket: the bit length of the element count) of an op word: what a
    deadline is learned for (watchdog.Learner).  Calls of one op whose sizes are within a factor of two
    share a bucket.  A group's making is one signature whatever its members (``encode_members``)."""
    sig = (word >> SIG_SHIFT) & (DTYPE_MASK << DTYPE_SHIFT | NUMEL_MASK)
    if sig >> DTYPE_SHIFT >= _FIRST_MEMBERS:
        return word & OP_MASK, 0, 0
    return word & OP_MASK, sig >> DTYPE_SHIFT, (sig & NUMEL_MASK).bit_length()
