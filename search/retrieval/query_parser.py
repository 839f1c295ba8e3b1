"""Keyword query syntax: forgiving by design.

    plain words        disjunctive and ranked: every term helps, none is required
    "quoted phrase"    required (the words in this order)
    -word, -"phrase"   excluded
    pre*               prefix: any indexed word starting with `pre`

Anything that does not parse as one of those is read as plain words: an unbalanced
quote is dropped, a lone `-` or `*` is ignored, a query made only of exclusions is read
as plain words, and punctuation (`&|!():<>`) never reaches a tsquery parser, because
terms become lexemes through `to_tsvector` and phrases through `phraseto_tsquery`, which
accept any text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(r'(-?)"([^"]*)"|(\S+)')
_PREFIX = re.compile(r"^([^\W_][\w.+#-]*?)\*+$")
MIN_PREFIX = 2


@dataclass
class ParsedQuery:
    terms: list[str] = field(default_factory=list)  # plain words (scored, optional)
    phrases: list[str] = field(default_factory=list)  # required, also scored
    excluded: list[str] = field(default_factory=list)  # words or phrases a hit must not contain
    prefixes: list[str] = field(default_factory=list)  # lower-cased prefixes (scored, optional)

    @property
    def positive_text(self) -> str:
        """Every scored word, as one text for `to_tsvector`."""
        return " ".join(self.terms + self.phrases)

    @property
    def empty(self) -> bool:
        return not (self.terms or self.phrases or self.prefixes)


def parse_query(text: str) -> ParsedQuery:
    query = ParsedQuery()
    text = (text or "").replace("\x00", " ")
    if text.count('"') % 2:  # unbalanced: quotes carry no meaning
        text = text.replace('"', " ")
    for match in _TOKEN.finditer(text):
        negated, quoted, word = match.group(1), match.group(2), match.group(3)
        if quoted is not None:
            quoted = " ".join(quoted.split())
            if not quoted:
                continue
            (query.excluded if negated else query.phrases).append(quoted)
            continue
        if word.startswith("-") and len(word) > 1 and word[1] not in "-":
            query.excluded.append(word[1:].rstrip("*"))
            continue
        prefix = _PREFIX.match(word)
        if prefix and len(prefix.group(1)) >= MIN_PREFIX:
            query.prefixes.append(prefix.group(1).lower())
            continue
        word = word.strip("*")
        if word and word != "-":
            query.terms.append(word)
    if query.empty and query.excluded:  # "-foo" alone: the user surely wants foo-ish results
        query.terms, query.excluded = query.excluded, []
    return query
