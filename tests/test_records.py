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
