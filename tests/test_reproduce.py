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
