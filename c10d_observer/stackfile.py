"""The stacks files' format, one codec: the header line each dump opens with, faulthandler's blocks per thread,
and reading a thread's frames or a summary back.  No torch, no imports of the package.
"""
import os
import re

# Each dump opens with a header line written by whoever asked (the watchdog) or made it (the helper):
#   === c10d_observer: stacks of rank R (pid P) at <time>: <why> ===
# then faulthandler's format, one block per thread:
#   Thread 0x00007f... (most recent call first):
#     File "train.py", line 12 in step
HEADER = "\n=== c10d_observer: %s ===\n"
_HEADER_LINE = re.compile(r"^=== c10d_observer: .*===$", re.M)
_THREAD = re.compile(r"^(Current thread|Thread) 0x0*([0-9a-f]+) \(most recent call first\):$", re.M)
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>.+)$')


def format_dump(header, threads, current=None):
    """One dump as text: ``threads`` is [(thread id, [(file, line, function), ...] innermost first)]."""
    out = [HEADER % header]
    for ident, frames in threads:
        out.append("%s 0x%016x (most recent call first):\n" % ("Current thread" if ident == current else "Thread",
                                                                ident))
        for filename, lineno, name in frames:
            out.append('  File "%s", line %s in %s\n' % (filename, lineno, name))
        out.append("\n")
    return "".join(out)


def has_dump(text):
    """Whether a stacks file holds a dump (not only the observer's note on its own threads)."""
    return "Thread 0x" in text or "Current thread" in text or "Stack (most recent" in text


def last_dump(text):
    """The text of the last dump in a stacks file (from its header line on), or the whole text."""
    marks = [m.start() for m in _HEADER_LINE.finditer(text or "")]
    return text[marks[-1]:] if marks else (text or "")


_BLOCKS = {}  # a thread's block of frame lines -> its frames: thread_frames


def thread_frames(text, thread):
    """[(file, line, function)] innermost first of ``thread``'s block in the last dump of ``text``, or None.

    A block's frames are parsed once per process: the merge reads every rank's main thread, and the ranks
    waiting in one call have the same frames (at 16,384 ranks 68 us a rank, 1.1 s of the merge, 2026-12-01)."""
    if not thread or not text:
        return None
    short = len(text) <= _SHORT
    if short:  # a dump of a few threads: its frames read once (the fuzzer's documents, a rank's summary)
        frames = _TEXTS.get((thread, text))
        if frames is not None:
            return list(frames)
    frames = _thread_frames(text, thread)
    if short:
        if len(_TEXTS) >= 1024:
            _TEXTS.clear()
        _TEXTS[(thread, text)] = frames
    return None if frames is None else list(frames)


_TEXTS = {}  # (thread, a dump's text of at most _SHORT characters) -> the thread's frames: thread_frames
_SHORT = 2048


def _thread_frames(text, thread):
    """thread_frames, uncached: the parsed frames (shared, in _BLOCKS), or None."""
    head = _last_head(text, thread)
    if head is None:
        return None
    start = head.end()
    end = text.find("\n\n", start)  # a block ends at its blank line: the parse below stops there
    block = text[start:end if end >= 0 else len(text)]
    frames = _BLOCKS.get(block)
    if frames is None:
        frames = []
        for line in block.splitlines()[1:]:
            m = _FRAME.match(line)
            if not m:
                break
            frames.append((m.group("file"), int(m.group("line")), m.group("func")))
        if len(_BLOCKS) >= 4096:
            _BLOCKS.clear()
        _BLOCKS[block] = frames
    return frames


def _last_head(text, thread):
    """The last header line of ``thread``'s block in ``text`` (a _THREAD match), or None: found from its hex
    digits (str.rfind, in C) and read by the pattern at its line only, where the pattern over every line of
    the text was 14 us a rank of a 4,096-rank merge, a fifth of its analysis (2026-12-02)."""
    needle = "%x (most recent call first):" % thread
    i = text.rfind(needle)
    while i >= 0:
        m = _THREAD.match(text, text.rfind("\n", 0, i) + 1)
        if m is not None and m.end() == i + len(needle) and int(m.group(2), 16) == thread:
            return m
        i = text.rfind(needle, 0, i)
    return None


def read_tail(path, limit=256 * 1024):
    """The last ``limit`` bytes of a file as text (a stacks file's last dump is at its end), or None."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode("utf-8", "replace")
    except (OSError, TypeError):
        return None


def thread_summary(text, thread, limit=16 * 1024):
    """What another node needs of a stacks file: the last dump's header line and ``thread``'s block,
    else the text's last ``limit`` bytes."""
    if not text:
        return text
    last = last_dump(text)
    if thread:
        for m in _THREAD.finditer(last):
            if int(m.group(2), 16) == thread:
                end = last.find("\n\n", m.end())
                head = last.split("\n", 1)[0] + "\n" if _HEADER_LINE.match(last) else ""
                return (head + last[m.start():end if end >= 0 else len(last)] + "\n")[:limit]
    return text[-limit:]
