"""Time words in a plain query ("meeting notes last week") read as a date filter."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from search.filters.dates import date_boundary
from search.filters.model import SearchFilters

_TIME_WORDS = re.compile(
    r"(?<![\w:\"'-])(?P<phrase>yesterday|today|this (?:week|month|year)|last (?:week|month|year)"
    r"|(?:in )?the (?:last|past) (?:week|month|year)|past (?:week|month|year)|recently|recent)(?![\w:\"'-])",
    re.IGNORECASE,
)

RECENT = "30 days ago"  # what "recent" and "recently" mean


@dataclass
class TimeWords:
    """Time words read as a date filter: the text without them, the filter, the words as written."""

    text: str
    filters: SearchFilters
    phrase: str


def time_words(text: str, *, now: datetime | None = None) -> TimeWords | None:
    """The first time phrase of a plain query as the dates it names: `yesterday` is that day, `today`
    and `this week|month|year` from their start, `last week|month|year` the 7 days, month or year up to
    now, `recent`/`recently` the last 30 days. None without one (a quoted phrase or a filter value is
    not read)."""
    if not text or '"' in text and text.count('"') % 2 == 0 and _inside_quotes(text):
        return None
    match = _TIME_WORDS.search(text)
    if match is None:
        return None
    phrase = match.group("phrase")
    word = " ".join(phrase.lower().split())
    word = re.sub(r"^(?:in )?the (?:last|past) ", "last ", word).replace("past ", "last ")
    out = SearchFilters()
    if word in ("recent", "recently"):
        out.after, out.after_text = date_boundary(RECENT, now=now), phrase
    else:
        out.after, out.after_text = date_boundary(word, now=now), phrase
        if word == "yesterday":
            out.before, out.before_text = date_boundary("today", now=now), phrase
    rest = " ".join((text[: match.start()] + " " + text[match.end() :]).split())
    return TimeWords(text=rest, filters=out, phrase=phrase)


def _inside_quotes(text: str) -> bool:
    """Some time phrase lies inside a quoted phrase: the words are meant literally."""
    return any(_TIME_WORDS.search(q) for q in re.findall(r'"([^"]*)"', text))
