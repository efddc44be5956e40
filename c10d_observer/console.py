"""The observer's own lines on the rank's stderr, each prefixed ``c10d_observer:`` (the watchdog's are
``c10d_observer[watchdog]``, watchdog.py).  Never raises: a closed stderr loses the line, not the job."""
import sys


def say(text):
    try:
        sys.stderr.write("c10d_observer: %s\n" % text)
        sys.stderr.flush()
    except Exception:
        pass
