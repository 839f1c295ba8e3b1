"""Text preparation shared by indexing and querying, so both sides produce the same lexemes.

PostgreSQL's parser handles most of what we need (camelCase identifiers stay one word,
`v1.2.3` is one token, snake_case splits into its parts on both sides), but two things
need help before `to_tsvector` sees the text:

- CJK has no spaces, so a whole run would become one unsearchable lexeme. Runs of
  Han/Kana/Hangul are rewritten as overlapping character bigrams (single characters stay):
  `東京都` → `東京 京都`. A query is rewritten the same way, so any two-character piece of
  a run is findable and a quoted CJK phrase is a bigram phrase.
- `C++`, `C#`, `F#` would lose their symbols and become the letter alone; they are spelled
  `cplusplus`, `csharp`, `fsharp` so they stay distinct from `c` and `f`.
"""

from __future__ import annotations

import re

from indexing.patterns import LazyPattern

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
CJK_RUN = LazyPattern(f"[{_CJK}]+")
_SYMBOLIC = LazyPattern(r"(?<![\w+#])([A-Za-z][A-Za-z0-9]*)(\+\+|#)(?![\w+#])")
# Words as the snippet highlighter sees them: letters/digits, dotted versions, C++/C#.
WORD = re.compile(r"[^\W_]+(?:\.[^\W_]+)*(?:\+\+|#)?")


def has_cjk(text: str) -> bool:
    # Every character of the runs is past ASCII: ASCII text never compiles the pattern (a slow one to compile).
    return not text.isascii() and CJK_RUN.search(text) is not None


def cjk_bigrams(run: str) -> list[str]:
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def _symbolic(match: re.Match) -> str:
    return match.group(1) + ("plusplus" if match.group(2) == "++" else "sharp")


def prepare_text(text: str) -> str:
    """The text `to_tsvector` should see for `text` (indexing and queries alike)."""
    if "+" in text or "#" in text:
        text = _SYMBOLIC.sub(_symbolic, text)
    if has_cjk(text):
        text = CJK_RUN.sub(lambda m: " " + " ".join(cjk_bigrams(m.group(0))) + " ", text)
    return text
