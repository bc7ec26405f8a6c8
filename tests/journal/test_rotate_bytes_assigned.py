"""A negative ``rotate_bytes`` is refused when assigned to an open journal too (C1.2 (d)).

The constructor refused it while ``j.rotate_bytes = -1`` afterwards was taken, and every
commit then rotated. The expectation is the theorem's: a ``ValueError`` naming the setting
and the threshold left as it was; 0 and positive sizes are still taken.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core.journal import Journal


@pytest.mark.fak_theorem("C1.2")
@settings(max_examples=10, deadline=None)
@given(bad=st.one_of(st.just(-1), st.integers(max_value=-1)), kept=st.sampled_from([0, 10**9]))
def test_a_negative_size_assigned_later_is_refused(
    tmp_path_factory: pytest.TempPathFactory, bad: int, kept: int
) -> None:
    path = tmp_path_factory.mktemp("rot") / "j.db"
    j = Journal(path, rotate_bytes=kept)
    try:
        with pytest.raises(ValueError, match="rotate_bytes"):
            j.rotate_bytes = bad
        assert j.rotate_bytes == kept
        j.rotate_bytes = 0  # 0 and positive sizes are still taken
        j.rotate_bytes = 1
        assert j.rotate_bytes == 1
        j.rotate_bytes = kept
    finally:
        j.close()
