"""The verdict's levels, on the floor that documents, protocols, the watchdog and the verdict all stand on: a
soft verdict (past a learned deadline) informs; a hard one (past the timeout) acts.  No imports of the package."""
import enum


class Level(str, enum.Enum):
    """A soft verdict (past a learned deadline) informs; a hard one (past the timeout) acts."""
    SOFT = "soft"
    HARD = "hard"

    def __str__(self):
        return self.value
