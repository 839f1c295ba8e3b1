"""Dates in filters: `2025-03`, `last week`, `3 days ago` as the moment they start or end."""

from __future__ import annotations

import calendar
from datetime import UTC, date, datetime, time, timedelta

from django.utils import timezone

from indexing.errors import InvalidSearchInput
from indexing.patterns import LazyPattern


def _iso(moment: datetime) -> str:
    return moment.date().isoformat() if moment.hour == moment.minute == moment.second == 0 else moment.isoformat()


def period_end(text: str, *, now: datetime | None = None, what: str = "date") -> datetime:
    """The first moment after the year, month or day `text` names (`2025-03` → 2025-04-01)."""
    value = " ".join(str(text).strip().lower().split())
    iso = _ISO_DAY.match(value)
    start = date_boundary(text, now=now, what=what)
    if iso and not iso.group(2):
        return start.replace(year=start.year + 1)
    if iso and not iso.group(3):
        return datetime.combine(_months_back(start.date(), -1), time(), tzinfo=UTC)
    if start.hour == start.minute == start.second == 0:
        return start + timedelta(days=1)
    return start


_ISO_DAY = LazyPattern(r"^(\d{4})(?:[-/](\d{1,2})(?:[-/](\d{1,2}))?)?$")

_AGO = LazyPattern(r"^(\d{1,4})\s*(h|hours?|d|days?|w|weeks?|m|mo|months?|y|years?)(?:\s+ago)?$")

_UNITS = {"h": "hour", "d": "day", "w": "week", "m": "month", "mo": "month", "y": "year"}

DATE_HELP = (
    "YYYY, YYYY-MM, YYYY-MM-DD, an ISO datetime, today, yesterday, 'this week|month|year', "
    "'last week|month|year', 'N days|weeks|months|years ago', 3d, 2w, 6m, 1y"
)


def date_boundary(text: str, *, now: datetime | None = None, what: str = "date") -> datetime:
    """The moment a date filter value starts: the first instant of the day, month or year written,
    or of the day a relative form names. Dates are read as UTC days, as the index reads a note's
    dates (indexing.structure); relative forms count from `now` in the server's time zone."""
    value = " ".join(str(text).strip().lower().replace("_", " ").split())
    if not value:
        raise InvalidSearchInput(f"{what}: the date is empty")
    now = now or _now()
    today = _local_date(now)
    day = None
    if value in ("now",):
        return now.astimezone(UTC)
    if value == "today":
        day = today
    elif value == "yesterday":
        day = today - timedelta(days=1)
    elif value == "tomorrow":
        day = today + timedelta(days=1)
    elif value in ("this week", "week"):
        day = today - timedelta(days=today.weekday())
    elif value in ("this month", "month"):
        day = today.replace(day=1)
    elif value in ("this year", "year"):
        day = today.replace(month=1, day=1)
    elif value in ("last week", "past week"):
        day = today - timedelta(days=7)
    elif value in ("last month", "past month"):
        day = _months_back(today, 1)
    elif value in ("last year", "past year"):
        day = _months_back(today, 12)
    else:
        ago = _AGO.match(value)
        if ago:
            n, unit = int(ago.group(1)), _UNITS.get(ago.group(2), ago.group(2).rstrip("s"))
            if unit == "hour":
                return (now - timedelta(hours=n)).astimezone(UTC)
            if unit == "day":
                day = today - timedelta(days=n)
            elif unit == "week":
                day = today - timedelta(weeks=n)
            elif unit == "month":
                day = _months_back(today, n)
            else:
                day = _months_back(today, 12 * n)
    if day is not None:
        return datetime.combine(day, time(), tzinfo=UTC)
    iso = _ISO_DAY.match(value)
    try:
        if iso:
            year, month, dd = int(iso.group(1)), int(iso.group(2) or 1), int(iso.group(3) or 1)
            return datetime(year, month, dd, tzinfo=UTC)
        text_iso = value.upper().replace(" ", "T", 1)
        if text_iso.endswith("Z"):
            text_iso = text_iso[:-1] + "+00:00"
        if text_iso[:4].isdigit():
            parsed = datetime.fromisoformat(text_iso)
            return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except ValueError:
        pass
    raise InvalidSearchInput(f"{what}: cannot read the date '{text}' (use {DATE_HELP})")


def _now() -> datetime:
    return timezone.now()


def _local_date(now: datetime) -> date:
    try:
        return timezone.localtime(now).date()
    except Exception:  # noqa: BLE001 - without Django settings: UTC
        return now.astimezone(UTC).date()


def _months_back(day: date, months: int) -> date:
    index = day.year * 12 + (day.month - 1) - months
    year, month = divmod(index, 12)
    return date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


def _relative(text: str) -> bool:
    return bool(text) and not text[:4].isdigit()


def _day(moment: datetime) -> str:
    if moment.hour == moment.minute == moment.second == 0:
        return moment.date().isoformat()
    return moment.isoformat()


def _latest(a: tuple, b: tuple) -> tuple:
    if a[0] is None:
        return b
    if b[0] is None:
        return a
    return a if a[0] >= b[0] else b


def _earliest(a: tuple, b: tuple) -> tuple:
    if a[0] is None:
        return b
    if b[0] is None:
        return a
    return a if a[0] <= b[0] else b
