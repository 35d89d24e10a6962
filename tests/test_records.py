"""lgcexp.records: the rows a rerun replaces in a committed runs table."""
import pandas as pd
import pytest

from lgcexp.records import replace_rows


def test_replace_rows_replaces_the_same_place_only():
    old = pd.DataFrame({"d": ["a", "a", "b"], "seed": [0.0, 1.0, 0.0], "rate": [0.1, 0.1, None], "v": [1, 2, 3]})
    new = pd.DataFrame({"d": ["a", "b", "c"], "seed": [1, 0, 0], "rate": [0.1, None, 0.2], "v": [20, 30, 40]})
    got = replace_rows(old, new, ["d", "seed", "rate", "absent"])
    # int 1 against float 1.0 and missing against missing are one place; ("a", 0) stays; new rows follow
    assert got["v"].tolist() == [1, 20, 30, 40]
    assert replace_rows(old, new.iloc[:0], ["d", "seed"])["v"].tolist() == [1, 2, 3]
    assert replace_rows(old, new, ["d"])["v"].tolist() == [20, 30, 40]
    with pytest.raises(ValueError, match="none|neither"):
        replace_rows(old, new, ["absent"])
    # nothing new: old as it was (dtypes included); duplicates within one table are kept
    same = replace_rows(old, pd.DataFrame(), ["d"])
    assert same.equals(old) and same["v"].dtype == old["v"].dtype
    twice = pd.concat([old, old.iloc[[0]]], ignore_index=True)
    assert replace_rows(twice, new.iloc[[2]], ["d", "seed"])["v"].tolist() == [1, 2, 3, 1, 40]
    # a key only old has: new's side is missing there, so only old rows missing it too are replaced
    assert replace_rows(old.assign(x=[1, None, 2]), new, ["d", "x"])["v"].tolist() == [1, 3, 20, 30, 40]
