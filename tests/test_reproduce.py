"""Hand cases for the cell-by-cell comparison behind `evaluate.py frontier --expect`."""

import pytest

from evaluation.reproduce import compare_tables, format_diffs, read_table


def _rows(**systems):
    return {name: {"system": name, **cells} for name, cells in systems.items()}


def test_identical_cells_reproduce_and_wall_time_is_not_compared():
    exp = _rows(a={"f1": "0.5", "module_cost": "2.0", "latency_s": "30.1", "latency_s_lo": "29"})
    act = _rows(a={"f1": "0.5", "module_cost": "2", "latency_s": "1.2", "latency_s_lo": "1"})
    d = compare_tables(exp, act, "frontier.csv")
    # "2.0" and "2" are one float; system, f1 and module_cost are compared, latency is not.
    assert d.ok and d.rows == 1 and d.cells == 3 and d.skipped == ["latency_s", "latency_s_lo"]


def test_a_changed_cell_a_missing_row_and_an_extra_row():
    exp = _rows(a={"f1": "0.5"}, b={"f1": "0.25"})
    act = _rows(a={"f1": "0.5000001"}, c={"f1": "0.1"})
    d = compare_tables(exp, act, "frontier.csv")
    assert not d.ok
    assert d.mismatches == [("a", "f1", "0.5", "0.5000001")]
    assert d.missing == ["b"] and d.extra == ["c"]
    lines = format_diffs([d], "committed/")
    assert lines[0].startswith("frontier.csv: DIFFERS from committed/ (1 rows, 2 cells compared, 1 differ")
    assert "  missing row: b" in lines and "  extra row (not in the expected table): c" in lines


def test_an_extra_row_alone_still_reproduces_and_a_missing_column_differs():
    assert compare_tables(_rows(a={"f1": "1"}), _rows(a={"f1": "1"}, z={"f1": "0"}), "t").ok
    d = compare_tables(_rows(a={"f1": "1", "em": "0"}), _rows(a={"f1": "1"}), "t")
    assert d.mismatches == [("a", "em", "0", "<no column>")]


def test_empty_cells_nan_and_text_compare_as_written():
    exp = _rows(a={"judge": "", "kind": "router", "x": "nan"})
    assert compare_tables(exp, _rows(a={"judge": "", "kind": "router", "x": "NaN"}), "t").ok
    d = compare_tables(exp, _rows(a={"judge": "0", "kind": "baseline", "x": "nan"}), "t")
    assert [m[1] for m in d.mismatches] == ["judge", "kind"]


def test_read_table_names_the_file_for_a_missing_key_column_or_a_duplicate_row(tmp_path):
    p = tmp_path / "frontier.csv"
    p.write_text("system,f1\na,0.5\nb,0.1\n")
    assert read_table(p, ["system"])["b"]["f1"] == "0.1"
    with pytest.raises(ValueError, match=r"frontier\.csv: no column 'family'"):
        read_table(p, ["family"])
    p.write_text("system,f1\na,0.5\na,0.1\n")
    with pytest.raises(ValueError, match=r"frontier\.csv: two rows named 'a'"):
        read_table(p, ["system"])
    with pytest.raises(FileNotFoundError, match=r"nowhere\.csv does not exist"):
        read_table(tmp_path / "nowhere.csv", ["system"])


def test_last_digit_rounding_reproduces_and_is_reported_apart():
    # The LoCoMo table committed on an Intel machine, replayed on an AMD EPYC: the bootstrap's matrix products
    # round differently, every point estimate is exact.
    exp = _rows(r={"f1": "0.41", "f1_hi": "0.4903248981867787", "cost_lo": "-0.0008196702587426434"})
    act = _rows(r={"f1": "0.41", "f1_hi": "0.49032489818677955", "cost_lo": "-0.000819670258742592"})
    d = compare_tables(exp, act, "frontier.csv")
    assert d.ok and not d.mismatches and [c[1] for c in d.rounding] == ["f1_hi", "cost_lo"]
    lines = format_diffs([d], "committed/")
    assert lines[0].startswith("frontier.csv: reproduced committed/ (1 rows, 4 cells compared, 0 differ")
    assert lines[1].startswith("  2 cells equal only within float rounding (relative 1e-09")


def test_a_difference_one_answer_could_make_is_not_rounding():
    # one answer of 1,000 changing by 0.5 F1 moves the mean by 5e-4: far outside the tolerance
    d = compare_tables(_rows(r={"f1": "0.4100"}), _rows(r={"f1": "0.4105"}), "t")
    assert not d.ok and not d.rounding
    d = compare_tables(_rows(r={"x": "1e-13"}), _rows(r={"x": "1e-11"}), "t")  # tiny, but 100x apart
    assert not d.ok
