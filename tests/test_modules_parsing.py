import pytest

from modules.parsing import ParseError, extract_section, parse_indices, parse_string_list, parse_summary


def test_string_list_plain_and_fenced_and_bare():
    assert parse_string_list('{"items": ["a | b | c", "d"]}') == ["a | b | c", "d"]
    assert parse_string_list('Sure!\n```json\n{"items": ["x"]}\n```') == ["x"]
    assert parse_string_list('["x", "y", "x"]') == ["x", "y"]  # de-duplicated, order kept


def test_string_list_salvages_truncated_json():
    # Cut off by max_tokens mid-string: the complete items are kept.
    assert parse_string_list('{"items": ["Alice | moved to | Berlin", "Bob | wor') == [
        "Alice | moved to | Berlin"
    ]


def test_string_list_garbage_raises():
    with pytest.raises(ParseError):
        parse_string_list("I cannot help with that.")
    with pytest.raises(ParseError):
        parse_string_list('{"answer": 3}')
    with pytest.raises(ParseError, match="truncated"):
        parse_string_list('{"items": [\n \t\t\t')


def test_indices_range_dedupe_and_truncation():
    assert parse_indices('{"relevant": [3, 1, 3, 9, 0]}', n=4) == [0, 2]
    assert parse_indices('{"relevant": [2, 4', n=4) == [1, 3]
    assert parse_indices('{"relevant": []}', n=4) == []
    with pytest.raises(ParseError):
        parse_indices("two and four", n=4)
    with pytest.raises(ParseError, match="truncated"):  # seen from SmolLM2: whitespace until max_tokens
        parse_indices('{\n  "relevant": [\n   \n     \t\t\t\t', n=4)


def test_extract_section_styles():
    assert extract_section(" x ", "direct") == "x"
    assert extract_section("Step 1. ...\nAnswer: [1]", "cot") == "[1]"
    assert extract_section("PLAN: a\nACT: b\nREFLECT: c\n<answer> final", "react") == "final"
    assert extract_section("<answer>one</answer> trailing", "react") == "one"
    with pytest.raises(ParseError, match="Answer"):
        extract_section("I think step by step and run out of tok", "cot")
    with pytest.raises(ParseError, match="answer"):
        extract_section("PLAN: look\nACT: read", "react")


def test_summary():
    assert parse_summary("Summary: Alice lives in Rome.") == "Alice lives in Rome."
    with pytest.raises(ParseError):
        parse_summary("   ")
