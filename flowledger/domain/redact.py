"""Secrets taken out of text that came from a tool or a target, before the ledger keeps it.

An n8n error message carries the target's reply, and a reply can quote the request that
caused it: ``Authorization: Bearer …``, ``?token=…``, a JSON body with ``"password": …``, or
the source's own API key echoed back (lowercased by a proxy, cut short by a log line). Events
are append-only and sealed into the chain, so a secret written once is kept for good:
:func:`redact` is applied to every such text *before* its first write (receipts, details, fail
errors, ``input_ref``, the n8n hook's message and names, copies of executions, a source's last
error, hold details and the alerts made of them) and to every log line.

It replaces, keeping the name so the text still reads:

- credentials after ``Bearer``/``Basic``/``Digest`` and whole ``Authorization:`` values
  (``Authorization: Bearer [redacted]``);
- the value of a parameter, header or JSON member whose name ends in ``token``, ``password``,
  ``passwd``, ``pwd``, ``secret``, ``api_key``/``apikey``/``api-key`` or ``auth``, written
  ``name=value`` (URL queries, forms), ``name: value`` (headers) or ``"name": "value"`` (JSON);
- the password of a URL's ``user:password@``;
- the ledger's own API tokens (``flt_…``);
- every configured secret (:func:`secrets_of`), case-insensitively, whole or any piece of
  :data:`MIN_FRAGMENT` characters or more of it (a key echoed lowercased or truncated).

Ids, input hashes and times are never passed through it: they must stay exact.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

MARK = "[redacted]"
MIN_FRAGMENT = 8  # a piece of a configured secret this long is a secret too
MIN_SECRET = 4  # shorter configured values are not looked for (they would match everywhere)

_KEYWORD = r"(?:token|passw(?:or)?d|pwd|secret|api[_-]?key|apikey|auth)"
_NAME = rf"[\w.-]*{_KEYWORD}"  # a name that ends in a keyword: ``access_token``, ``db_pwd``
_KEYWORDS = ("token", "passw", "pwd", "secret", "apikey", "api_key", "api-key", "auth")
_CREDENTIAL = r"[A-Za-z0-9._~+/-]{6,}=*"  # RFC 7235 token68, at least 6 long


def _scheme(match: re.Match[str]) -> str:
    scheme = f"{match.group('scheme')} " if match.group("scheme") else ""
    return f"{match.group('name')}{scheme}{MARK}"


def _kept(*groups: str) -> Callable[[re.Match[str]], str]:
    """A replacement that keeps the named groups around the mark."""
    before, *after = groups
    return lambda m: f"{m.group(before)}{MARK}{''.join(m.group(g) for g in after)}"


Replacement = Callable[[re.Match[str]], str]
# (words one of which the lowercased text must hold for the pattern to be tried, the pattern,
# its replacement).
_PATTERNS: tuple[tuple[tuple[str, ...], re.Pattern[str], Replacement], ...] = (
    # ``Authorization: Bearer x`` / ``"Authorization": "Basic x"``: the scheme stays.
    (
        ("authorization",),
        re.compile(
            r"(?i)(?P<name>\b(?:proxy-)?authorization\\?[\"']?\s*[:=]\s*\\?[\"']?)"
            r"(?:(?P<scheme>bearer|basic|digest|token|negotiate)\s+)?[^\s\"'\\,;]+"
        ),
        _scheme,
    ),
    # A scheme's credentials anywhere (a curl line, a header echoed in prose).
    (
        ("bearer", "basic", "digest"),
        re.compile(rf"(?P<name>\b(?:[Bb]earer|BEARER|[Bb]asic|BASIC|Digest)\s+){_CREDENTIAL}"),
        _kept("name"),
    ),
    # JSON and Python-repr members: ``"token": "x"``, ``\"token\":\"x\"``, ``'pwd': 'x'``.
    (
        _KEYWORDS,
        re.compile(
            rf"(?i)(?P<name>(?P<q>\\?[\"']){_NAME}(?P=q)\s*:\s*(?P<v>\\?[\"']))"
            r"(?:\\.|(?!(?P=v)).)*?(?P<end>(?P=v))"
        ),
        _kept("name", "end"),
    ),
    # ``name=value`` in queries, forms and prose (the name's start is left as it is).
    (_KEYWORDS, re.compile(rf"(?i)(?P<name>{_KEYWORD}\s*=\s*)[^\s&#\"'<>]+"), _kept("name")),
    # ``name: value`` in headers; in prose ("invalid token: expired") only a value with a digit.
    (
        _KEYWORDS,
        re.compile(rf"(?i)(?P<name>{_KEYWORD}\s*:\s*)(?=[^\s,;\"'<>]*\d)[^\s,;\"'<>]{{6,}}"),
        _kept("name"),
    ),
    # ``scheme://user:password@host`` (tried only on a text with an ``@``: URLs are common).
    (
        ("@",),
        re.compile(r"(?i)(?P<name>\b[a-z][a-z0-9+.-]*://[^\s/:@]*:)[^\s/@]+(?P<at>@)"),
        _kept("name", "at"),
    ),
    # The ledger's own API tokens (``flt_`` and 43 URL-safe characters).
    (("flt_",), re.compile(r"(?P<name>\bflt_)[A-Za-z0-9_-]{8,}"), _kept("name")),
)
_WORDS = tuple(dict.fromkeys(word for words, _, _ in _PATTERNS for word in words))
_RUN = re.compile(rf"\S{{{MIN_FRAGMENT},}}")


@dataclass(frozen=True)
class Secrets:
    """The configured secrets, prepared for :func:`redact`: each lowercased, every window of
    :data:`MIN_FRAGMENT` characters of them, and one pattern for those the windows cannot find
    (shorter ones, and those with a space)."""

    values: tuple[str, ...] = ()
    windows: frozenset[str] = field(default=frozenset(), repr=False)
    whole: re.Pattern[str] | None = field(default=None, repr=False)

    def __bool__(self) -> bool:
        return bool(self.values)


NO_SECRETS = Secrets()


def secrets_of(values: Iterable[str | None]) -> Secrets:
    """:class:`Secrets` for ``values`` (``None``, blank and short ones are left out)."""
    kept = sorted(
        {_lower(v.strip()) for v in values if v and len(v.strip()) >= MIN_SECRET},
        key=lambda v: (-len(v), v),
    )
    if not kept:
        return NO_SECRETS
    windows = frozenset(
        v[i : i + MIN_FRAGMENT] for v in kept for i in range(len(v) - MIN_FRAGMENT + 1)
    )
    # The windows find every secret of MIN_FRAGMENT characters or more that has no space in
    # it; the rest are looked for whole.
    rest = [v for v in kept if len(v) < MIN_FRAGMENT or any(c.isspace() for c in v)]
    whole = re.compile("|".join(re.escape(v) for v in rest), re.IGNORECASE) if rest else None
    return Secrets(tuple(kept), windows, whole)


def redact(text: str, secrets: Secrets = NO_SECRETS) -> str:
    """``text`` with every credential pattern and every configured secret (whole, or a piece of
    :data:`MIN_FRAGMENT` characters or more, in any case) replaced by ``[redacted]``."""
    if not text:
        return text
    low = text.lower()
    # Most texts hold none of the words: substring tests are far cheaper than the patterns.
    if _has_word(low, _WORDS):
        for words, pattern, replacement in _PATTERNS:
            if _has_word(low, words):
                text = pattern.sub(replacement, text)
    return _known(text, secrets) if secrets else text


def _has_word(low: str, words: tuple[str, ...]) -> bool:
    # A loop, not any() over a generator: cheaper for a text with none of the words, and the
    # sweep redacts the detail of every hold it opens (bench/README.md, "Domain").
    for word in words:  # noqa: SIM110
        if word in low:
            return True
    return False


def _known(text: str, secrets: Secrets) -> str:
    if secrets.whole is not None:
        text = secrets.whole.sub(MARK, text)
    if not secrets.windows:
        return text
    # A piece of a secret: every run of non-space characters long enough to hold one is
    # slid over, window by window (a set lookup each), and a hit is grown while it is still
    # a piece of some secret. Written out because no regular expression says "any substring
    # of 8 or more characters of these values" without listing every one.
    return _RUN.sub(lambda m: _pieces(m.group(), secrets), text)


def _pieces(run: str, secrets: Secrets) -> str:
    low = _lower(run)
    windows = secrets.windows
    starts = range(len(low) - MIN_FRAGMENT + 1)
    # Most runs hold no piece: every window tested at C speed first (no Python loop).
    if windows.isdisjoint(map(low.__getitem__, map(slice, starts, range(MIN_FRAGMENT, 1 << 62)))):
        return run
    out: list[str] = []
    i = start = 0
    last = len(low) - MIN_FRAGMENT
    while i <= last:
        if low[i : i + MIN_FRAGMENT] not in windows:
            i += 1
            continue
        end = i + MIN_FRAGMENT
        while end < len(low) and any(low[i : end + 1] in v for v in secrets.values):
            end += 1
        out.append(run[start:i])
        out.append(MARK)
        i = start = end
    if not out:
        return run
    out.append(run[start:])
    return "".join(out)


def _lower(text: str) -> str:
    """Lowercase that keeps every character's position (a few characters, such as ``İ``,
    lowercase to two)."""
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
