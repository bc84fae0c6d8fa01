"""Fusion functions against hand-computed results."""

from __future__ import annotations

import pytest

from deepfield.fusion import convex, max_normalized, min_max_normalized, rrf


def test_rrf_hand_computed() -> None:
    fused = dict(rrf([[(1, 9.0), (2, 5.0)], [(2, 0.9), (3, 0.8)]], k=60))
    assert fused[2] == pytest.approx(1 / 62 + 1 / 61)
    assert fused[1] == pytest.approx(1 / 61)
    assert fused[3] == pytest.approx(1 / 62)
    assert list(dict(rrf([[(1, 9.0), (2, 5.0)], [(2, 0.9), (3, 0.8)]]))) == [2, 1, 3]


def test_normalisations() -> None:
    assert max_normalized([(1, 4.0), (2, 2.0)]) == {1: 1.0, 2: 0.5}
    assert max_normalized([]) == {}
    assert min_max_normalized([(1, 0.9), (2, 0.5), (3, 0.7)]) == pytest.approx(
        {1: 1.0, 2: 0.0, 3: 0.5})
    assert min_max_normalized([(1, 0.3), (2, 0.3)]) == {1: 1.0, 2: 1.0}


def test_convex_hand_computed() -> None:
    keyword = [(1, 10.0), (2, 6.0), (4, 2.0)]
    dense = [(2, 0.9), (3, 0.5), (1, 0.7), (4, 0.3)]  # cosines of the whole candidate union
    fused = dict(convex(keyword, dense, keyword_weight=0.25))
    assert fused[1] == pytest.approx(0.25 * 1.0 + 0.75 * (0.4 / 0.6))
    assert fused[2] == pytest.approx(0.25 * 0.5 + 0.75 * 1.0)
    assert fused[3] == pytest.approx(0.75 * (0.2 / 0.6))
    assert fused[4] == pytest.approx(0.0)
    assert [item for item, _ in convex(keyword, dense, 0.25)] == [2, 1, 3, 4]


def test_convex_places_a_hit_without_a_vector_by_its_keyword_score() -> None:
    keyword = [(5, 12.0), (1, 10.0), (2, 6.0)]  # chunk 5 has no vector: absent from dense
    dense = [(2, 0.9), (3, 0.5), (1, 0.7)]
    fused = dict(convex(keyword, dense, keyword_weight=0.25, keyword_only={5}))
    assert fused[5] == pytest.approx(1.0)  # not 0.25: its similarity is unknown, not zero
    assert fused[1] == pytest.approx(0.25 * (4 / 6) + 0.75 * (0.2 / 0.4))
    assert dict(convex(keyword, dense, keyword_weight=0.25))[5] == pytest.approx(0.25)
