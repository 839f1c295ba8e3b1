"""Query expansion: parsing messy model output and user-written structured queries."""

import json

import pytest

from indexing.errors import InvalidSearchInput
from search.pipeline.expansion import (
    EXPANSION_SCHEMA,
    QueryVariant,
    expansion_cache_key,
    expansion_prompt,
    parse_expansion,
    parse_query_document,
)

GOOD = json.dumps(
    {
        "variants": [
            {"type": "lex", "text": "postgres autovacuum tuning"},
            {"type": "vec", "text": "how do I make PostgreSQL vacuum run more often"},
            {
                "type": "hyde",
                "text": "Lower autovacuum_vacuum_scale_factor so that vacuum starts after fewer dead rows.",
            },
        ]
    }
)


def kinds(variants):
    return [(v.kind, v.text) for v in variants]


def test_well_formed_answer():
    assert kinds(parse_expansion(GOOD, query="vacuum")) == [
        ("lex", "postgres autovacuum tuning"),
        ("vec", "how do I make PostgreSQL vacuum run more often"),
        ("hyde", "Lower autovacuum_vacuum_scale_factor so that vacuum starts after fewer dead rows."),
    ]


def test_prose_code_fence_and_thinking_around_the_json():
    messy = (
        "<think>The user wants vacuum info. Let me write {variants}.</think>\n"
        "Sure! Here are the variants you asked for:\n```json\n" + GOOD + "\n```\nHope this helps."
    )
    assert kinds(parse_expansion(messy, query="vacuum")) == kinds(parse_expansion(GOOD, query="vacuum"))


def test_json_embedded_in_prose_without_fence():
    text = 'Answer follows {"variants": [{"type": "vec", "text": "bread baking at home"}]} done'
    assert kinds(parse_expansion(text)) == [("vec", "bread baking at home")]


def test_missing_types_are_inferred_from_length():
    text = json.dumps(
        {
            "variants": [
                {"text": "sourdough starter"},
                {"text": "how to keep a sourdough starter alive for weeks"},
                {"text": " ".join(["A healthy starter is fed flour and water daily"] * 3)},
            ]
        }
    )
    assert [v.kind for v in parse_expansion(text)] == ["lex", "vec", "hyde"]


def test_plain_string_list_and_typed_strings():
    text = json.dumps(["lex: rust borrow checker", "vec: why does rust reject my reference", "ownership"])
    assert kinds(parse_expansion(text)) == [
        ("lex", "rust borrow checker"),
        ("lex", "ownership"),
        ("vec", "why does rust reject my reference"),
    ]


def test_dict_keyed_by_type_and_aliases():
    text = json.dumps(
        {
            "keywords": ["gc pauses", "garbage collector"],
            "semantic": "why my program stalls",
            "hypothetical": "The JVM stops the world during full collections.",
        }
    )
    assert kinds(parse_expansion(text)) == [
        ("lex", "gc pauses"),
        ("lex", "garbage collector"),
        ("vec", "why my program stalls"),
        ("hyde", "The JVM stops the world during full collections."),
    ]


def test_duplicates_and_the_query_itself_are_dropped():
    text = json.dumps(
        {
            "variants": [
                {"type": "lex", "text": "Vacuum Tuning"},
                {"type": "lex", "text": "postgres vacuum"},
                {"type": "vec", "text": "postgres   VACUUM!"},
                {"type": "lex", "text": "vacuum tuning"},
            ]
        }
    )
    assert kinds(parse_expansion(text, query="vacuum tuning")) == [("lex", "postgres vacuum")]


def test_limits_per_type():
    text = json.dumps(
        {
            "variants": [{"type": "lex", "text": f"term {i}"} for i in range(6)]
            + [{"type": "hyde", "text": f"passage number {i} about things"} for i in range(3)]
        }
    )
    variants = parse_expansion(text)
    assert [v.kind for v in variants] == ["lex"] * 3 + ["hyde"]


def test_unknown_types_empty_texts_and_non_strings_are_dropped():
    text = json.dumps(
        {
            "variants": [
                {"type": "sql", "text": "select 1"},
                {"type": "lex", "text": "   "},
                {"type": "vec", "text": 42},
                {"type": "vec", "text": "!!!"},
                17,
                None,
                {"type": "vec", "text": "real variant here"},
            ]
        }
    )
    assert kinds(parse_expansion(text)) == [("vec", "real variant here")]


def test_line_format_without_json():
    text = (
        "Here you go:\n1. lex: docker compose volumes\n- **vec**: how to persist data in compose\n"
        "hyde: Named volumes keep data."
    )
    assert kinds(parse_expansion(text)) == [
        ("lex", "docker compose volumes"),
        ("vec", "how to persist data in compose"),
        ("hyde", "Named volumes keep data."),
    ]


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "I cannot help with that.",
        "{not json",
        "[]",
        "{}",
        "null",
        "```\n```",
        '{"variants": "lex"}',
        "<think>only thinking",
    ],
)
def test_garbage_yields_no_variants(garbage):
    assert parse_expansion(garbage, query="anything") == []


def test_over_long_texts_are_cut_at_a_word():
    text = json.dumps({"variants": [{"type": "lex", "text": "word " * 100}]})
    (variant,) = parse_expansion(text)
    assert len(variant.text) <= 120 and not variant.text.endswith(" ")


def test_prompt_mentions_intent_and_schema_is_json_schema():
    assert "homebrew beer" in expansion_prompt("fermentation", "homebrew beer")
    assert "What the searcher means" not in expansion_prompt("fermentation")
    assert EXPANSION_SCHEMA["properties"]["variants"]["items"]["properties"]["type"]["enum"] == ["lex", "vec", "hyde"]


def test_cache_key_depends_on_query_intent_and_model():
    base = expansion_cache_key(query="q", intent=None, model="m")
    assert base == expansion_cache_key(query=" q ", intent="", model="m")
    assert (
        len(
            {
                base,
                expansion_cache_key(query="q", intent="i", model="m"),
                expansion_cache_key(query="q", intent=None, model="m2"),
                expansion_cache_key(query="q2", intent=None, model="m"),
            }
        )
        == 4
    )


# --- structured query documents ----------------------------------------------------------


def test_plain_query_is_not_a_document():
    assert parse_query_document("how to tune vacuum") is None
    assert parse_query_document("error: connection refused") is None


def test_structured_document_with_plain_line():
    plan = parse_query_document(
        "how to tune vacuum\nlex: autovacuum scale factor\nVEC: make postgres vacuum more often\n"
        "hyde: Set autovacuum_vacuum_scale_factor lower.\nintent: database administration"
    )
    assert plan.original == "how to tune vacuum"
    assert plan.source == "user" and plan.intent == "database administration"
    assert kinds(plan.variants) == [
        ("lex", "autovacuum scale factor"),
        ("vec", "make postgres vacuum more often"),
        ("hyde", "Set autovacuum_vacuum_scale_factor lower."),
    ]
    assert plan.rerank_query == "how to tune vacuum"


def test_structured_document_without_plain_line_reranks_on_a_variant():
    plan = parse_query_document("lex: sourdough\nvec: keeping a starter alive")
    assert plan.original is None
    assert plan.rerank_query == "keeping a starter alive"
    assert parse_query_document("lex: sourdough").rerank_query == "sourdough"


def test_structured_document_drops_duplicates_and_extras_with_a_warning():
    plan = parse_query_document("lex: a1\nlex: a2\nlex: a3\nlex: a4\nlex: A1\nvec:\nvec: b")
    assert kinds(plan.variants) == [("lex", "a1"), ("lex", "a2"), ("lex", "a3"), ("vec", "b")]
    assert any("empty" in w for w in plan.warnings)
    assert any("2 structured query line(s) were dropped" in w for w in plan.warnings)


def test_structured_document_without_any_text_is_an_error():
    with pytest.raises(InvalidSearchInput, match="no text to search for"):
        parse_query_document("intent: something\nlex:   ")


def test_variant_as_dict():
    assert QueryVariant("lex", "x").as_dict() == {"type": "lex", "text": "x"}
