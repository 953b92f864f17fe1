"""Fixtures of the training tests."""

from __future__ import annotations

import pytest

from connectx_baselines.teacher_labels import TeacherSet, make_teacher_set
from connectx_gym.bitboard import Geometry

#: the small board of the teacher tests
SMALL = Geometry(4, 5, 3)


@pytest.fixture(scope="module")
def small_set() -> TeacherSet:
    """300 labelled positions of the small board."""
    return make_teacher_set(SMALL, 300, seed=1, min_ply=1, exclude=())
