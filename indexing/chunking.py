"""Split markdown into overlapping chunks that end at natural boundaries.

An embedding model sees a bounded number of tokens, and a vector for a whole
long document blurs its topics together, so documents are cut into chunks of
about `max_tokens` tokens. Where to cut matters: a chunk that ends just before a
heading keeps a section whole, one that ends in the middle of a code block
produces two meaningless halves. The rules:

* every line start is a possible break point with a score: heading h1 100,
  h2 90, h3 80, h4 70, h5 60, h6 50, code fence 80 (before an opening fence and
  after a closing one), horizontal rule 60, a line after a blank line 20, list
  item 5, any other line 1;
* the cut is chosen inside a window of `window` tokens before the target size,
  maximising ``score × (1 − (distance / window)² × decay)`` (decay 0.7), so a
  strong boundary a little earlier beats a weak one right at the target;
* never inside a fenced code block (or front matter), unless the block alone is
  larger than a chunk: then it is cut at line starts inside it;
* consecutive chunks overlap by `overlap` (15 %) of the size, so a passage cut in
  two is still whole in one of them (no overlap after a cut made to keep a code
  block whole: the next chunk starts with the block);
* when a window has no break point at all (one enormous paragraph line), the cut
  falls back to a sentence end, then to whitespace, then to a token boundary.

Sizes are counted in *estimated* tokens (see `count_tokens`), and the window and
the target are positions in that token stream, not in characters: text that is
dense in tokens (CJK, code, base64, tables of numbers) is therefore cut by its
token count directly, which is what "dense content that tokenises beyond the
limit is split again" asks for, without a second pass.

Each chunk records its character offsets and 1-based start line in the
document. `ChunkParams.describe()` is stored with the index fingerprint, so a
change of parameters marks existing vectors stale.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import asdict, dataclass

# --- token estimate ----------------------------------------------------------------

TOKENIZER = "approx-v1"

# Han, Kana, Hangul (and their compatibility blocks): one token per character, as
# sub-word tokenizers of multilingual models roughly do.
_CJK = "\u2e80-\u2fdf\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"
_TOKEN_RE = re.compile(rf"(?P<cjk>[{_CJK}])|(?P<word>[^\W_{_CJK}]+)|(?P<sym>[^\w\s]|_)")
# A word is one token per started run of this many characters: "the" 1, "protein" 2,
# "immunohistochemistry" 4. Checked against the all-MiniLM (BERT word piece)
# tokenizer on SciFact: the estimate is at or above the real count for most chunks,
# so a chunk sized by it rarely exceeds a model's real limit.
_CHARS_PER_PIECE = 5


def _token_starts(text: str) -> list[int]:
    """Character offset of every estimated token."""
    starts: list[int] = []
    append = starts.append
    for match in _TOKEN_RE.finditer(text):
        start = match.start()
        if match.lastgroup == "word":
            end = match.end()
            starts.extend(range(start, end, _CHARS_PER_PIECE))
        else:
            append(start)
    return starts


def count_tokens(text: str) -> int:
    """Cheap, dependency-free token estimate.

    Word runs count one token per 5 characters (rounded up), every punctuation
    character and every CJK character counts one. About 4 characters per token on
    English prose, which is what real sub-word tokenizers give; pmd does not load
    the model's own tokenizer (it lives inside the LLM server).
    """
    # One match per token, all found in C: a word's greedy runs of at most 5 characters are its
    # rounded-up count (half the time of a loop over the words; Ask counts before the first token).
    return len(_PIECE_RE.findall(text))


_PIECE_RE = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]{{1,{_CHARS_PER_PIECE}}}|[^\w\s]|_")


# --- parameters and results ----------------------------------------------------------


@dataclass(frozen=True)
class ChunkParams:
    max_tokens: int = 900
    overlap: float = 0.15
    window: int = 200
    decay: float = 0.7
    tokenizer: str = TOKENIZER

    def __post_init__(self):
        if self.max_tokens < 16:
            raise ValueError(f"chunk size must be at least 16 tokens, got {self.max_tokens}")
        if not 0 <= self.overlap < 0.5:
            raise ValueError(f"chunk overlap must be between 0 and 0.5, got {self.overlap}")
        if self.window < 1:
            raise ValueError(f"chunk window must be at least 1 token, got {self.window}")

    @property
    def window_tokens(self) -> int:
        # 200 tokens at the default 900; scaled down for small chunks so that a
        # 250-token chunk cannot end up 50 tokens long.
        return max(1, min(self.window, self.max_tokens * 2 // 9))

    @property
    def overlap_tokens(self) -> int:
        return int(round(self.max_tokens * self.overlap))

    def describe(self) -> dict:
        """What is recorded in the index fingerprint."""
        return {**asdict(self), "window": self.window_tokens}


@dataclass(frozen=True)
class Chunk:
    seq: int
    text: str
    char_start: int
    char_end: int
    start_line: int
    tokens: int


# --- markdown structure --------------------------------------------------------------

_HEADING_SCORES = {1: 100, 2: 90, 3: 80, 4: 70, 5: 60, 6: 50}
FENCE_SCORE = 80
RULE_SCORE = 60
BLANK_SCORE = 20
LIST_SCORE = 5
LINE_SCORE = 1

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]|$)")
_SETEXT_1 = re.compile(r"^ {0,3}=+[ \t]*$")
_SETEXT_2 = re.compile(r"^ {0,3}-+[ \t]*$")
_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_LIST = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\S")
# Possessive (`*+`): with plain `*` the blanks before a fence could be split between the three
# blank runs in every way, which is quadratic on a line of 30,000 spaces (or a deep nested list).
_FENCE_OPEN = re.compile(r"^[ \t]*+(?:>[ \t]?+)*+[ \t]*+(`{3,}+|~{3,}+)(.*)$")
_FENCE_CLOSE = re.compile(r"^[ \t]*+(?:>[ \t]?+)*+[ \t]*+(`{3,}+|~{3,}+)[ \t]*+$")
_SENTENCE_END = re.compile(r"[.!?](?=\s)|[。！？]")
_WHITESPACE = re.compile(r"\s+")


@dataclass
class _Structure:
    breaks: dict[int, int]  # char offset of a line start -> score (outside fences)
    fences: list[tuple[int, int]]  # protected regions: [start char, end char)
    inner_lines: list[int]  # line starts inside protected regions


def _line_starts(text: str) -> list[int]:
    starts = [0]
    starts.extend(m.end() for m in re.finditer("\n", text) if m.end() < len(text))
    return starts


def _scan(text: str) -> _Structure:
    starts = _line_starts(text)
    lines = [
        text[s : (starts[i + 1] if i + 1 < len(starts) else len(text))].rstrip("\r\n") for i, s in enumerate(starts)
    ]
    scores = [LINE_SCORE] * len(lines)
    protected = [False] * len(lines)
    fences: list[tuple[int, int]] = []

    def protect(first: int, last: int) -> None:
        """Lines first..last (inclusive) form one block that should not be cut."""
        for j in range(first + 1, last + 1):
            protected[j] = True
        end = starts[last + 1] if last + 1 < len(starts) else len(text)
        fences.append((starts[first], end))

    i = 0
    # Front matter: a YAML block at the very top belongs with what follows it.
    if lines and lines[0].strip() == "---":
        for j in range(1, len(lines)):
            if lines[j].strip() in ("---", "..."):
                protect(0, j)
                i = j + 1
                break
    while i < len(lines):
        match = _FENCE_OPEN.match(lines[i])
        if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
            marker = match.group(1)
            close = len(lines) - 1  # an unclosed fence runs to the end of the document
            for j in range(i + 1, len(lines)):
                closing = _FENCE_CLOSE.match(lines[j])
                if closing and closing.group(1)[0] == marker[0] and len(closing.group(1)) >= len(marker):
                    close = j
                    break
            scores[i] = max(scores[i], FENCE_SCORE)
            if close + 1 < len(lines):
                scores[close + 1] = max(scores[close + 1], FENCE_SCORE)
            protect(i, close)
            i = close + 1
            continue
        i += 1

    for i, line in enumerate(lines):
        if protected[i]:
            continue
        score = scores[i]
        heading = _ATX.match(line)
        if heading:
            score = max(score, _HEADING_SCORES[len(heading.group(1))])
        elif line.strip() and i + 1 < len(lines) and not protected[i + 1] and not _LIST.match(line):
            # A setext heading: text underlined with === (h1) or --- (h2).
            if _SETEXT_1.match(lines[i + 1]):
                score = max(score, _HEADING_SCORES[1])
            elif _SETEXT_2.match(lines[i + 1]) and not _RULE.match(line):
                score = max(score, _HEADING_SCORES[2])
        if _RULE.match(line) and not (i > 0 and lines[i - 1].strip() and _SETEXT_2.match(line)):
            score = max(score, RULE_SCORE)
        if line.strip() and i > 0 and not lines[i - 1].strip() and not _follows_heading(lines, i):
            score = max(score, BLANK_SCORE)
        if _LIST.match(line):
            score = max(score, LIST_SCORE)
        scores[i] = score

    breaks = {starts[i]: scores[i] for i in range(1, len(lines)) if not protected[i]}
    inner = [starts[i] for i in range(1, len(lines)) if protected[i]]
    return _Structure(breaks=breaks, fences=fences, inner_lines=inner)


def _follows_heading(lines: list[str], i: int) -> bool:
    """A heading belongs with the text under it: no blank-line bonus right after one."""
    j = i - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    return j >= 0 and bool(_ATX.match(lines[j]))


# --- chunking --------------------------------------------------------------------------


def chunk_markdown(text: str, params: ChunkParams | None = None) -> list[Chunk]:
    """Cut a markdown document into chunks; see the module docstring for the rules."""
    params = params or ChunkParams()
    if not text.strip():
        return []
    token_starts = _token_starts(text)
    n_tokens = len(token_starts)
    if n_tokens <= params.max_tokens:
        return [_make_chunk(text, 0, 0, len(text), n_tokens)]

    structure = _scan(text)
    max_tokens, window = params.max_tokens, params.window_tokens

    def tok(char: int) -> int:
        """Index of the first token at or after a character offset."""
        return bisect.bisect_left(token_starts, char)

    # Break candidates keyed by the token index they would cut before: a cut at
    # token t makes the chunk [start, t). Several line starts can map to the same
    # token (blank lines): keep the best score.
    break_at: dict[int, tuple[int, int]] = {}
    for char, score in structure.breaks.items():
        t = tok(char)
        if 0 < t < n_tokens and (t not in break_at or score > break_at[t][0]):
            break_at[t] = (score, char)
    break_tokens = sorted(break_at)
    fence_spans = [(tok(a), tok(b), a) for a, b in structure.fences]  # in order, not overlapping
    fence_firsts = [a for a, _, _ in fence_spans]
    newlines = [m.start() for m in re.finditer("\n", text)]  # a chunk's line: a bisection, not a count
    inner_at: dict[int, int] = {}
    for char in structure.inner_lines:
        inner_at.setdefault(tok(char), char)
    inner_tokens = sorted(inner_at)

    def best_in_window(candidates: list[int], lo: int, hi: int, score_of) -> int | None:
        best, best_value = None, -1.0
        for t in candidates[bisect.bisect_left(candidates, lo) : bisect.bisect_right(candidates, hi)]:
            distance = hi - t
            value = score_of(t) * (1 - (distance / window) ** 2 * params.decay)
            if value > best_value or (value == best_value and best is not None and t > best):
                best, best_value = t, value
        return best

    chunks: list[Chunk] = []
    start_tok, start_char = 0, 0
    while True:
        if n_tokens - start_tok <= max_tokens:
            chunks.append(_make_chunk(text, len(chunks), start_char, len(text), n_tokens - start_tok, newlines))
            break
        target = start_tok + max_tokens
        lo = max(start_tok + 1, target - window)
        keep_overlap = True
        cut_tok = best_in_window(break_tokens, lo, target, lambda t: break_at[t][0])
        cut_char = break_at[cut_tok][1] if cut_tok is not None else None
        if cut_tok is None:
            k = bisect.bisect_left(fence_firsts, target) - 1  # the last block starting before the target
            fence = fence_spans[k] if k >= 0 and target < fence_spans[k][1] else None
            if fence and fence[1] - fence[0] <= max_tokens and fence[0] > start_tok:
                # The window lies inside a code block that fits in one chunk: end
                # this chunk before it, and start the next one with it.
                cut_tok, cut_char, keep_overlap = fence[0], fence[2], False
        if cut_tok is None:
            cut_tok = best_in_window(inner_tokens, lo, target, lambda t: LINE_SCORE)
            cut_char = inner_at[cut_tok] if cut_tok is not None else None
        if cut_tok is None:
            cut_tok, cut_char = _fallback_cut(text, token_starts, lo, target)

        chunks.append(_make_chunk(text, len(chunks), start_char, cut_char, cut_tok - start_tok, newlines))

        next_char = cut_char
        if keep_overlap and params.overlap_tokens:
            next_tok = max(cut_tok - params.overlap_tokens, start_tok + 1)
            if next_tok < cut_tok:
                next_char = _overlap_start(text, token_starts[next_tok], cut_char, token_starts[start_tok])
                if tok(next_char) <= start_tok:  # never go backwards
                    next_char = cut_char
        start_tok, start_char = tok(next_char), next_char
        if start_tok >= n_tokens:
            break
    return chunks


def _fallback_cut(text: str, token_starts: list[int], lo: int, target: int) -> tuple[int, int]:
    """No line break in the window: cut after the last sentence end, else at whitespace."""
    lo_char, hi_char = token_starts[lo], token_starts[target]
    region = text[lo_char:hi_char]
    for pattern in (_SENTENCE_END, _WHITESPACE):
        ends = [m.end() for m in pattern.finditer(region)]
        if ends:
            char = lo_char + ends[-1]
            t = bisect.bisect_left(token_starts, char)
            if lo <= t <= target:
                return t, token_starts[t] if t < len(token_starts) else char
    return target, token_starts[target]


def _overlap_start(text: str, char: int, cut_char: int, floor: int = 0) -> int:
    """Where the next chunk starts, given the overlap's first token at `char`.

    Prefer a line start, then a sentence start, within the first half of the
    overlap (so the overlap keeps at least half its size); else a word start.
    A start at or before `floor` (this chunk's start) is refused by the caller:
    the word start is not looked for further back (a 2 MB word).
    """
    if char > 0 and text[char - 1] == "\n":
        return char
    half = char + (cut_char - char) // 2
    newline = text.find("\n", char, half)
    if newline != -1:
        start = newline + 1
        while start < half and text[start] in "\r\n":  # skip blank lines
            start += 1
        return start
    sentence = _SENTENCE_END.search(text, char, half)
    if sentence:
        start = sentence.end()
        while start < cut_char and text[start].isspace():
            start += 1
        if start < cut_char:
            return start
    while char > floor and text[char - 1].isalnum() and text[char].isalnum():
        char -= 1
    return char


def _make_chunk(text: str, seq: int, start: int, end: int, tokens: int, newlines: list[int] | None = None) -> Chunk:
    line = bisect.bisect_left(newlines, start) + 1 if newlines is not None else text.count("\n", 0, start) + 1
    return Chunk(seq=seq, text=text[start:end], char_start=start, char_end=end, start_line=line, tokens=tokens)
