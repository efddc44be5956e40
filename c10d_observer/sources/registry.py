"""The one registry of the rank side's patches (STYLE.md, "Patches live in a registry"): keyed by (owner,
attribute), installing twice is a no-op, restore runs in reverse order and only where the attribute still holds
our wrapper.  Shared by the patch source, the functional collectives' wrappers and the group watch."""
import logging

log = logging.getLogger("c10d_observer")

_MISSING = object()


class PatchRegistry(object):
    """Keyed by (owner, attribute): installing twice is a no-op; restore runs in reverse order and only
    where the attribute still holds our wrapper."""

    def __init__(self):
        self._patches = []
        self._keys = set()

    def wrap(self, owner, name, make_wrapper):
        key = (id(owner), name)
        if key in self._keys:
            return False
        original = vars(owner).get(name, _MISSING)
        current = getattr(owner, name)
        wrapper = make_wrapper(current)
        setattr(owner, name, wrapper)
        self._patches.append((owner, name, original, wrapper))
        self._keys.add(key)
        return True

    def restore(self):
        left = []
        while self._patches:
            owner, name, original, wrapper = self._patches.pop()
            if vars(owner).get(name, _MISSING) is not wrapper:
                left.append("%s.%s" % (getattr(owner, "__name__", owner), name))
                continue
            if original is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        self._keys.clear()
        if left:
            log.warning("c10d_observer: left %s as found: something replaced our wrapper", ", ".join(left))

    def __len__(self):
        return len(self._patches)
