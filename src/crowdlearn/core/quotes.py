"""Finding a quoted value that a delimited text opens and never closes.

pyarrow reads such a value to the end of the file without an error, and pandas' error counts
records, not file lines; :func:`unclosed_quote_line` finds the file line of the quote, in
one pass over the text in chunks of any size, for the table readers
(:mod:`crowdlearn.core.tables`) and the platform-export readers (:mod:`crowdlearn.io.common`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

__all__ = ["unclosed_quote_line", "unclosed_quote_at", "one_row_per_line", "last_line_span"]

#: the inside of a quoted value up to its closing quote: no quote but doubled ones
_QUOTED_BODY = re.compile(r'[^"]*(?:""[^"]*)*')
#: text outside quoted values and whole quoted values: what comes before the first quote
#: that opens a value and does not close (one regular expression, not a loop in Python per
#: value).  A quote opens a value at the start of the text or after a separator ({sep}) or
#: a line break; elsewhere it is a character of the value, for pandas and pyarrow alike.
#: A value counts as closed when a character follows its closing quote (at the end of a
#: chunk the next one may double it); the lookahead and back-reference make its inside
#: atomic (Python 3.10 has no possessive quantifiers), so that the first quote of a doubled
#: one is never taken for the closing one
_OUTSIDE_RUN = (r'(?:[^"]+|(?<![^{sep}\r\n])"(?=([^"]*(?:""[^"]*)*))\1"(?=[^"])'
                r'|(?<=[^{sep}\r\n])")*')
#: characters matched by one call of the _OUTSIDE_RUN pattern: the regex engine keeps a
#: backtracking record per value matched, which would take gigabytes on a large file
_RUN_WINDOW = 1 << 16


def unclosed_quote_line(chunks: Iterable[str], sep: str) -> int | None:
    """The file line on which a quoted value opens that the text never closes.

    A quote opens a value at the start of a field only; inside one, a doubled quote is a
    quote of the value and a single one closes it, after which the field goes on unquoted
    to the next separator (pandas' and pyarrow's reading).  A value left open at the end of
    the text is the one that makes a parser read the rest of the file as one value.

    Parameters
    ----------
    chunks : iterable of str
        The text, in pieces of any size (a file read in blocks: its state is carried from
        one to the next, so memory does not grow with the file).
    sep : str
        The field separator.

    Returns
    -------
    int or None
        The 1-based line (header = line 1) of the quote that opens the unclosed value, or
        None when every quoted value is closed.
    """
    run = re.compile(_OUTSIDE_RUN.format(sep=re.escape(sep)))
    # lines are counted as an editor does, by LF, or by CR in a file with CRs only; which
    # one is known at the end, so both are counted (before the chunk, and before the quote)
    lf = cr = 0
    opened = None       # (LFs, CRs) before the quote of the open value; None outside a value
    prev = ""           # outside a value: the character before the chunk (is a quote there a field start?)
    carry = ""          # inside a value: a quote that ended the previous chunk (closing, or half of "")
    first = True
    for chunk in chunks:
        if first and chunk:
            chunk, first = chunk.removeprefix("\ufeff"), False
        text = (carry if opened is not None else prev) + chunk
        own = len(text) - len(chunk)  # where the chunk's own characters start in text
        pos, carry = own if opened is None else 0, ""
        mark = own  # line breaks are counted up to here (from the last quote that opened)
        while True:
            if opened is None:
                end = min(len(text), pos + _RUN_WINDOW)
                pos = run.match(text, pos, end).end()
                if pos == end:
                    if end == len(text):
                        break  # outside a value at the end of the chunk
                    continue
                # a quote opening a value that does not close in the window (or at all)
                lf, cr, mark = lf + text.count("\n", mark, pos), cr + text.count("\r", mark, pos), pos
                opened = (lf, cr)
                pos += 1
            pos = _QUOTED_BODY.match(text, pos).end()
            if pos == len(text):
                break  # still open: the value goes on in the next chunk
            if pos + 1 == len(text):
                carry = '"'  # a closing quote, or the first of a doubled one: the next chunk says
                break
            opened, pos = None, pos + 1
        lf, cr = lf + text.count("\n", mark), cr + text.count("\r", mark)
        prev = text[-1:]
    if opened is None or carry:  # (a quote at the very end closes the value)
        return None
    return 1 + (opened[0] if lf else opened[1])


def unclosed_quote_at(path, line: int) -> ValueError:
    """The error of a quoted value opened on ``line`` of ``path`` and never closed."""
    return ValueError(
        f'{path}: line {line}: unterminated quote: the value opened by the quote (") on this '
        "line is never closed, so the rest of the file would be read as part of it; close "
        "the quote, or remove it (a quote inside a quoted value is written twice)"
    )


def one_row_per_line(rows: int, breaks: int, ends_with_break: bool, blank_lines: Callable[[], int]) -> bool:
    """Whether a parser's ``rows`` records (header excluded) are one per line of the text.

    ``breaks`` is the text's number of line breaks (its last line may have none:
    ``ends_with_break``); blank lines are skipped by the parsers, so ``blank_lines()`` (called
    only when needed: most files have none) is subtracted.  When it holds, no value spans
    lines, and only the last line can hold a quote that never closes: the readers then check
    that line alone instead of the whole text.
    """
    lines = breaks + (not ends_with_break)
    return rows == lines - 1 or rows == lines - 1 - blank_lines()


def last_line_span(text):
    """``(start, end)`` of the last line of ``text`` (str or bytes) that holds anything."""
    newline, ends = ("\n", "\r\n") if isinstance(text, str) else (b"\n", b"\r\n")
    end = len(text.rstrip(ends))
    return text.rfind(newline, 0, end) + 1, end
