"""Smart markdown chunking: boundaries, code fences, dense text, offsets."""

from __future__ import annotations

import re

import pytest

from indexing.chunking import ChunkParams, chunk_markdown, count_tokens


def assert_well_formed(text: str, chunks, params: ChunkParams) -> None:
    """Offsets and lines are right, every chunk fits, and together they cover the text."""
    assert chunks, "a non-empty document has chunks"
    assert chunks[0].char_start == 0
    assert chunks[-1].char_end == len(text)
    for i, chunk in enumerate(chunks):
        assert chunk.seq == i
        assert chunk.text == text[chunk.char_start : chunk.char_end]
        assert chunk.start_line == text.count("\n", 0, chunk.char_start) + 1
        assert chunk.tokens == count_tokens(chunk.text) <= params.max_tokens
    for before, after in zip(chunks, chunks[1:]):
        assert after.char_start <= before.char_end, "no gap between consecutive chunks"
        assert after.char_start > before.char_start, "chunks advance"


def section(title: str, words: int, level: int = 2) -> str:
    body = " ".join(f"w{i}" for i in range(words))  # one token per word
    return f"{'#' * level} {title}\n\n{body}\n\n"


def test_short_document_is_one_chunk():
    text = "# Hello\n\nA short note.\n"
    chunks = chunk_markdown(text, ChunkParams(max_tokens=100))
    assert [(c.char_start, c.char_end, c.start_line) for c in chunks] == [(0, len(text), 1)]


def test_empty_and_blank_documents_have_no_chunks():
    assert chunk_markdown("") == []
    assert chunk_markdown("\n \n\t\n") == []


def test_cuts_land_on_headings_when_one_is_in_the_window():
    params = ChunkParams(max_tokens=120, overlap=0.0)
    text = "".join(section(f"Part{i}", 18) for i in range(20))  # a heading every ~22 tokens
    chunks = chunk_markdown(text, params)
    assert_well_formed(text, chunks, params)
    assert len(chunks) > 1
    for chunk in chunks[1:]:
        assert chunk.text.startswith("## Part"), chunk.text[:40]


def test_a_strong_boundary_a_little_earlier_beats_a_newline_at_the_target():
    params = ChunkParams(max_tokens=100, overlap=0.0, window=200)  # window = 22 tokens
    # 90 one-token lines, then an h1 at token ~90, then lines up to token 100 and beyond.
    lines = [f"w{i}" for i in range(88)]
    text = "\n".join(lines) + "\n# Heading\n" + "\n".join(f"v{i}" for i in range(60)) + "\n"
    chunks = chunk_markdown(text, params)
    assert chunks[1].text.startswith("# Heading")


def test_heading_stays_with_the_text_below_it():
    params = ChunkParams(max_tokens=60, overlap=0.0)
    text = "intro " * 50 + "\n\n## Title\n\n" + "body " * 80 + "\n"
    chunks = chunk_markdown(text, params)
    assert not any(c.text.rstrip().endswith("## Title") for c in chunks)


def test_code_fence_that_fits_is_never_cut():
    params = ChunkParams(max_tokens=200)
    fence = "```python\n" + "".join(f"value_{i} = compute({i})\n" for i in range(20)) + "```\n"
    assert count_tokens(fence) < 200
    text = (
        "Intro paragraph.\n\n"
        + "lorem ipsum dolor sit amet " * 30
        + "\n"
        + fence
        + "\nAfter the code.\n"
        + "tail text " * 40
    )
    chunks = chunk_markdown(text, params)
    assert_well_formed(text, chunks, params)
    assert any(fence in c.text for c in chunks), "the whole fence is inside one chunk"
    # no chunk boundary falls strictly inside the fence
    fence_start = text.index(fence)
    fence_end = fence_start + len(fence)
    for chunk in chunks:
        assert not fence_start < chunk.char_end < fence_end


def test_code_fence_larger_than_a_chunk_is_split_at_lines():
    params = ChunkParams(max_tokens=100)
    fence = "```\n" + "".join(f"line {i} of a very long listing\n" for i in range(120)) + "```\n"
    text = "# Code\n\n" + fence
    chunks = chunk_markdown(text, params)
    assert_well_formed(text, chunks, params)
    assert len(chunks) >= 5
    for chunk in chunks[:-1]:
        assert chunk.text.endswith("\n"), "cut at a line start inside the oversized fence"


def test_tilde_fences_and_unclosed_fences_are_protected():
    params = ChunkParams(max_tokens=80, overlap=0.0)
    text = "text " * 60 + "\n\n~~~\n" + "# not a heading\n" * 10 + "~~~\n" + "more " * 60 + "\n"
    chunks = chunk_markdown(text, params)
    assert_well_formed(text, chunks, params)
    assert not any(c.text.startswith("# not a heading") for c in chunks)
    unclosed = "para " * 70 + "\n\n```\n" + "# inside\n" * 15
    chunks = chunk_markdown(unclosed, params)
    assert_well_formed(unclosed, chunks, params)
    assert count_tokens(unclosed[unclosed.index("```") :]) < 80
    assert not any(c.text.startswith("# inside") for c in chunks)


def test_document_without_headings_breaks_at_paragraphs():
    params = ChunkParams(max_tokens=100, overlap=0.0)
    paragraphs = [" ".join(f"p{p}w{i}" for i in range(30)) for p in range(12)]
    text = "\n\n".join(paragraphs) + "\n"
    chunks = chunk_markdown(text, params)
    assert_well_formed(text, chunks, params)
    for chunk in chunks[1:]:
        assert re.match(r"p\d+w0 ", chunk.text), chunk.text[:20]


def test_one_enormous_line_is_cut_after_sentences():
    params = ChunkParams(max_tokens=100, overlap=0.0)
    text = " ".join(f"Sentence number {i} says something short." for i in range(80))
    chunks = chunk_markdown(text, params)
    assert_well_formed(text, chunks, params)
    for chunk in chunks[:-1]:
        assert chunk.text.rstrip().endswith("."), chunk.text[-30:]


def test_cjk_text_is_cut_by_tokens_not_characters():
    params = ChunkParams(max_tokens=100)
    text = "検索エンジンは文書を小さな断片に分割します。" * 60  # no spaces, no newlines
    assert count_tokens(text) == len(text)
    chunks = chunk_markdown(text, params)
    assert_well_formed(text, chunks, params)
    assert len(chunks) >= len(text) // 100
    for chunk in chunks[:-1]:
        assert chunk.text.endswith("。"), "cut after a CJK full stop"


def test_dense_tokens_are_split_even_without_any_boundary():
    params = ChunkParams(max_tokens=64, overlap=0.0)
    text = "x" * 2000  # base64-like blob: 400 estimated tokens, no whitespace at all
    chunks = chunk_markdown(text, params)
    assert_well_formed(text, chunks, params)
    assert len(chunks) >= 2000 // (64 * 5)


def test_tables_are_cut_between_rows():
    params = ChunkParams(max_tokens=120, overlap=0.0)
    header = "| name | value | note |\n|---|---|---|\n"
    rows = "".join(f"| item{i} | {i * 3} | a note about item {i} |\n" for i in range(80))
    text = "## Table\n\n" + header + rows
    chunks = chunk_markdown(text, params)
    assert_well_formed(text, chunks, params)
    for chunk in chunks:
        assert chunk.text.endswith("\n")
        assert chunk.text.lstrip().startswith(("|", "##"))


def test_front_matter_is_kept_whole():
    params = ChunkParams(max_tokens=50, overlap=0.0)
    front = "---\n" + "".join(f"key{i}: value {i}\n" for i in range(8)) + "---\n"
    text = front + "\n# Doc\n\n" + "body text " * 60 + "\n"
    chunks = chunk_markdown(text, params)
    assert_well_formed(text, chunks, params)
    assert front in chunks[0].text


def test_consecutive_chunks_overlap_by_about_fifteen_percent():
    params = ChunkParams(max_tokens=200)
    text = "\n".join(" ".join(f"l{line}w{i}" for i in range(8)) for line in range(300)) + "\n"
    chunks = chunk_markdown(text, params)
    assert_well_formed(text, chunks, params)
    for before, after in zip(chunks, chunks[1:]):
        shared = text[after.char_start : before.char_end]
        assert 0.07 * 200 <= count_tokens(shared) <= 0.15 * 200 + 1
        assert after.text.startswith("l"), "the overlap starts at a line start"


def test_setext_headings_count_as_headings():
    params = ChunkParams(max_tokens=100, overlap=0.0)
    text = ("alpha " * 80) + "\n\nSecond part\n-----------\n\n" + ("beta " * 80) + "\n"
    chunks = chunk_markdown(text, params)
    assert any(c.text.startswith("Second part\n---") for c in chunks)


def test_parameters_are_described_for_the_fingerprint():
    described = ChunkParams(max_tokens=900).describe()
    assert described == {"max_tokens": 900, "overlap": 0.15, "window": 200, "decay": 0.7, "tokenizer": "approx-v1"}
    assert ChunkParams(max_tokens=250).describe()["window"] == 55


@pytest.mark.parametrize("bad", [dict(max_tokens=4), dict(overlap=0.7), dict(window=0)])
def test_invalid_parameters_are_refused(bad):
    with pytest.raises(ValueError):
        ChunkParams(**bad)


def test_token_estimate():
    assert count_tokens("") == 0
    assert count_tokens("the cat sat") == 3
    assert count_tokens("immunohistochemistry") == 4
    assert count_tokens("snake_case_name") == 5  # snake, _, case, _, name
    assert count_tokens("日本語") == 3
    assert count_tokens("a, b.") == 4


def test_random_mixed_markdown_is_always_well_formed():
    import random

    rng = random.Random(7)
    pieces = [
        lambda: f"{'#' * rng.randint(1, 6)} heading {rng.randint(0, 99)}\n",
        lambda: "\n",
        lambda: (
            " ".join(
                rng.choice(["alpha", "beta", "gamma", "delta", "x", "snake_case"]) for _ in range(rng.randint(1, 60))
            )
            + "\n"
        ),
        lambda: "```\n" + "code line\n" * rng.randint(1, 80) + "```\n",
        lambda: "- item\n" * rng.randint(1, 10),
        lambda: "| a | b |\n|---|---|\n" + "| 1 | 2 |\n" * rng.randint(1, 20),
        lambda: "---\n",
        lambda: "漢字かなカナ。" * rng.randint(1, 40) + "\n",
        lambda: "word." * rng.randint(1, 300),
    ]
    for _ in range(40):
        text = "".join(rng.choice(pieces)() for _ in range(rng.randint(1, 60)))
        if not text.strip():
            continue
        params = ChunkParams(max_tokens=rng.choice([32, 64, 150]), overlap=rng.choice([0.0, 0.15, 0.3]))
        assert_well_formed(text, chunk_markdown(text, params), params)


# --- linear in the note's size: whitespace and indentation used to backtrack ---


def test_a_megabyte_line_of_spaces_is_chunked_like_any_other_line():
    prose = "".join(section(f"Part{i}", 150) for i in range(8))
    text = prose + " " * 1_000_000 + "x\n\n" + prose
    for params in (ChunkParams(), ChunkParams(overlap=0.0)):
        chunks = chunk_markdown(text, params)
        assert_well_formed(text, chunks, params)
        assert len(chunks) == 4
        assert sum(" " * 1_000_000 + "x\n" in chunk.text for chunk in chunks) == 1  # the line is never cut
    assert [chunk.text[:8] for chunk in chunks] == [
        "## Part0",
        "## Part5",
        "## Part2",
        "## Part7",
    ]  # no overlap: at headings


def test_a_deep_nested_list_is_cut_at_its_items():
    params = ChunkParams()
    text = "".join("  " * depth + f"- item {depth}\n" for depth in range(1000))  # 1 MB, 3,000 tokens
    chunks = chunk_markdown(text, params)
    assert_well_formed(text, chunks, params)
    assert len(chunks) == 4
    assert all(text[chunk.char_start - 1] == "\n" and chunk.text.lstrip().startswith("- item ") for chunk in chunks[1:])


def test_an_indented_fence_is_still_a_fence():
    params = ChunkParams(max_tokens=40, overlap=0.0)
    code = "\n".join(f"x{i} = {i}" for i in range(8))
    text = (
        "".join(section(f"S{i}", 10) for i in range(3))
        + " " * 5000
        + "> ```py\n"
        + code
        + "\n> ```\n"
        + section("End", 10)
    )
    chunks = chunk_markdown(text, params)
    assert_well_formed(text, chunks, params)
    assert any(chunk.text.lstrip(" ").startswith("> ```py\n" + code + "\n> ```\n") for chunk in chunks)


def test_a_two_megabyte_word_is_cut_at_token_boundaries():
    params = ChunkParams()
    text = "a" * 2_000_000 + "\n"
    chunks = chunk_markdown(text, params)
    assert_well_formed(text, chunks, params)
    assert len(chunks) == -(-400_000 // params.max_tokens)  # inside one word there is no word start to overlap from
    assert all(after.char_start == before.char_end for before, after in zip(chunks, chunks[1:]))


def test_token_count_is_the_number_of_token_starts():
    """count_tokens (one regex match per token) agrees with the per-token offsets the chunker cuts at."""
    import random

    from indexing.chunking import _token_starts

    rng = random.Random(7)
    alphabet = "ab cdé_\n\t.,;漢字かな한글ﾊ0123456789-–—\u00a0\u2028ΩЖ  xyzαβ#*`"
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert count_tokens(text) == len(_token_starts(text)), text
