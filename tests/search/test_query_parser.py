import pytest

from search.retrieval.query_parser import parse_query


def test_plain_words_are_terms():
    q = parse_query("vector index rollout")
    assert q.terms == ["vector", "index", "rollout"] and not (q.phrases or q.excluded or q.prefixes)


def test_phrase_negation_and_prefix():
    q = parse_query('"exact phrase" other -bad -"not this" embed*')
    assert q.phrases == ["exact phrase"]
    assert q.terms == ["other"]
    assert q.excluded == ["bad", "not this"]
    assert q.prefixes == ["embed"]


@pytest.mark.parametrize("text", ['"unbalanced quote', "foo & | !(bar", "*", "-", '""', "a*", ":*", "\x00"])
def test_malformed_syntax_falls_back_to_plain_terms(text):
    q = parse_query(text)
    assert not q.phrases and not q.prefixes or q.prefixes == []


def test_unbalanced_quote_keeps_words():
    assert parse_query('"hello world').terms == ["hello", "world"]


def test_only_exclusions_become_terms():
    q = parse_query("-reranker")
    assert q.terms == ["reranker"] and q.excluded == []


def test_identifiers_stay_whole():
    assert parse_query("getUserById snake_case C++ v1.2.3").terms == ["getUserById", "snake_case", "C++", "v1.2.3"]
