"""Re-ranker answers: yes/no log-probabilities → confidence, and the 0-10 rating fallback."""

import math

import pytest

from indexing.llm import TokenLogprob
from search.pipeline.rerank import (
    RerankItem,
    confidence_from_logprobs,
    confidence_from_text,
    judge_messages,
    parse_rating,
    rating_messages,
    rerank_cache_key,
)


def lp(token, logprob, *top):
    return TokenLogprob(token, logprob, tuple(top))


def test_yes_and_no_probabilities_are_normalised():
    p = confidence_from_logprobs([lp("yes", math.log(0.6), ("yes", math.log(0.6)), ("no", math.log(0.2)))])
    assert p == pytest.approx(0.75)


def test_a_confident_no_gives_low_confidence():
    p = confidence_from_logprobs([lp("no", math.log(0.9), ("no", math.log(0.9)), ("yes", math.log(0.1)))])
    assert p == pytest.approx(0.1)


def test_spellings_of_yes_are_pooled():
    entry = lp("Yes", math.log(0.3), ("Yes", math.log(0.3)), (" yes", math.log(0.3)), ("no", math.log(0.2)))
    assert confidence_from_logprobs([entry]) == pytest.approx(0.75)


def test_only_one_word_among_alternatives():
    assert confidence_from_logprobs([lp("yes", math.log(0.8))]) == pytest.approx(0.8)
    assert confidence_from_logprobs([lp("no", math.log(0.8), ("maybe", -2.0))]) == pytest.approx(0.2)


def test_leading_whitespace_and_empty_thinking_tokens_are_skipped():
    entries = [
        lp("\n", -0.01),
        lp("<think>", -0.01),
        lp("</think>", -0.01),
        lp("yes", math.log(0.5), ("no", math.log(0.5))),
    ]
    assert confidence_from_logprobs(entries) == pytest.approx(0.5)


def test_unrelated_answers_and_no_logprobs_give_none():
    assert confidence_from_logprobs([lp("Perhaps", -0.1, ("Maybe", -2.0))]) is None
    assert confidence_from_logprobs([]) is None
    assert confidence_from_logprobs([lp("yes", float("-inf"))]) is None


def test_bare_text_answers():
    assert confidence_from_text("Yes.") == 1.0
    assert confidence_from_text("<think>hmm</think>\nno") == 0.0
    assert confidence_from_text("it depends") is None
    assert confidence_from_text("") is None


@pytest.mark.parametrize(
    "answer, expected",
    [
        ('{"score": 7}', 0.7),
        ('```json\n{"rating": 10}\n```', 1.0),
        ("Relevance: 3/10", 0.3),
        ("**8**", 0.8),
        ("I'd say 6.5 out of 10", 0.65),
        ("<think>between 2 and 9</think>score 0", 0.0),
        ('{"score": "4"}', 0.4),
        ("85/100", 0.85),
        ("5", 0.5),
    ],
)
def test_rating_parsing(answer, expected):
    assert parse_rating(answer) == pytest.approx(expected)


@pytest.mark.parametrize("answer", ["", "relevant", "11", "-3", '{"score": 42}', '{"score": true}', "nan"])
def test_unusable_ratings(answer):
    assert parse_rating(answer) is None


def test_prompts_carry_query_document_and_intent():
    system, user = judge_messages("vacuum", "A text about vacuum.", intent="postgres")
    assert system["role"] == "system" and '"yes" or "no"' in system["content"]
    assert "<Query>: vacuum" in user["content"] and "<Document>: A text about vacuum." in user["content"]
    assert "postgres" in user["content"]
    assert "postgres" not in judge_messages("vacuum", "d")[1]["content"]
    assert "0 (unrelated) to 10" in rating_messages("q", "d")[1]["content"]
    assert len(judge_messages("q", "x" * 10_000)[1]["content"]) < 4200


def test_cache_key_is_per_query_chunk_model_and_method():
    item = RerankItem("k", "chunk text")
    assert item.chunk_hash == RerankItem("other key", "chunk text").chunk_hash
    args = dict(query="q", intent=None, chunk_hash=item.chunk_hash, model="m", method="logprobs")
    base = rerank_cache_key(**args)
    variants = [
        dict(args, query="q2"),
        dict(args, chunk_hash="0" * 64),
        dict(args, model="m2"),
        dict(args, method="rating"),
        dict(args, intent="i"),
    ]
    assert len({base, *(rerank_cache_key(**v) for v in variants)}) == 6
