"""Times as users write them (model/): ``--at``, ``?at=`` and ``Model.objects.at()`` read them here.

    "2026-11-24T10:00:00Z" | "2026-11-24 10:00" | "-10m" | "-1h30m" | "now" ──parse_time()──► aware UTC datetime

A pure function: the caller gives "now", so the rule is tested with plain data.
"""

from __future__ import annotations

import datetime as dt
import re

from .errors import ValidationError

FIELD = "at"  # how errors name the option
EXAMPLES = "ISO 8601 (2026-11-24T10:00:00Z; UTC when no offset is given) or a time ago (-30s, -10m, -2h, -1d, -1h30m)"
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_RELATIVE = re.compile(r"-((?:[0-9]{1,9}[smhdw])+)")
_PART = re.compile(r"([0-9]+)([smhdw])")


def parse_time(text: str | dt.datetime, now: dt.datetime) -> dt.datetime:
    """The aware UTC time ``text`` means, or ValidationError naming the problem; never later than ``now``."""
    if isinstance(text, dt.datetime):
        if text.tzinfo is None:
            raise ValidationError(FIELD, None, f"{text.isoformat()} has no time zone; give an aware datetime (UTC)")
        at = text.astimezone(dt.UTC)
    else:
        at = _parse_text(text.strip(), now)
    if at > now:
        raise ValidationError(FIELD, None, f"{at.isoformat()} is in the future (now is {now.isoformat()})")
    return at


def _parse_text(text: str, now: dt.datetime) -> dt.datetime:
    if not text:
        raise ValidationError(FIELD, None, f"a time is required: {EXAMPLES}")
    if text == "now":
        return now
    relative = _RELATIVE.fullmatch(text)
    if relative:
        seconds = sum(int(n) * UNITS[unit] for n, unit in _PART.findall(relative.group(1)))
        try:
            return now - dt.timedelta(seconds=seconds)
        except OverflowError:
            raise ValidationError(FIELD, None, f"{text!r} is further back than any time") from None
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValidationError(FIELD, None, f"{text[:64]!r} is not a time: give {EXAMPLES}") from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)).astimezone(dt.UTC)
