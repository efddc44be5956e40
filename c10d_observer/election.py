"""The one rule of every election among a node's processes (the relay that talks to the store, by its beat
files; the watchdog that joins arrivals, by its documents).  No torch, no imports of the package."""


def node_leader(heard, now, within):
    """A node's leader: its lowest rank heard from within ``within`` seconds of ``now`` (``heard``: rank ->
    when last heard, on one clock), else None.  The one rule of every election among a node's processes (the
    relay that talks to the store, by its beat files; the watchdog that joins arrivals, by its documents), so
    that a leader that dies or freezes is replaced within ``within`` seconds and a lower rank that comes back
    takes over."""
    alive = [r for r, t in heard.items() if t is not None and now - t <= within]
    return min(alive) if alive else None
