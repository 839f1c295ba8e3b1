"""indexing.patterns: regular expressions compiled when first used (a search's start-up)."""

import copy
import re

from indexing.keyword import analysis
from indexing.patterns import LazyPattern


def test_a_lazy_pattern_matches_as_the_compiled_one_and_compiles_once():
    lazy = LazyPattern(r"(\w+)@(\w+)", re.I)
    assert "sub" not in vars(lazy)  # nothing compiled before it is used
    compiled = re.compile(r"(\w+)@(\w+)", re.I)
    text = "Mail ME@Example or you@there"
    assert lazy.sub(r"\2", text) == compiled.sub(r"\2", text)
    assert [m.groups() for m in lazy.finditer(text)] == [m.groups() for m in compiled.finditer(text)]
    assert lazy.pattern == compiled.pattern and lazy.flags == compiled.flags
    assert vars(lazy)["sub"].__self__ is vars(lazy)["finditer"].__self__  # one compiled pattern
    assert copy.copy(lazy).search(text).group(1) == "ME"


def test_ascii_text_never_compiles_the_cjk_pattern():
    """The CJK pattern takes milliseconds to compile: a search of ASCII words must not pay for it."""
    pattern = LazyPattern(analysis.CJK_RUN._arguments[0])
    original, analysis.CJK_RUN = analysis.CJK_RUN, pattern
    try:
        assert analysis.prepare_text("C++ and protein expression") == "Cplusplus and protein expression"
        assert not analysis.has_cjk("plain words")
        assert "search" not in vars(pattern) and "sub" not in vars(pattern)
        assert not analysis.has_cjk("café")  # not ASCII: the pattern decides
        assert analysis.prepare_text("東京都 tokyo") == " 東京 京都  tokyo"
    finally:
        analysis.CJK_RUN = original
