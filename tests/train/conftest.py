"""Fixtures of the training tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from baselines.teacher_labels import TeacherSet, make_teacher_set
from connectx_gym.bitboard import Geometry

#: the small board of the teacher tests
SMALL = Geometry(4, 5, 3)


@pytest.fixture(scope="module")
def small_set() -> TeacherSet:
    """300 labelled positions of the small board."""
    return make_teacher_set(SMALL, 300, seed=1, min_ply=1, exclude=())


@pytest.fixture(autouse=True, scope="session")
def sb3_logs_in_a_temporary_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """SB3 models made without ``tensorboard_log`` log to ``$SB3_LOGDIR``, else to a new
    ``SB3-<time>`` folder in the system's temporary directory that nothing removes: the
    tests' go where pytest cleans up."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SB3_LOGDIR", str(tmp_path_factory.mktemp("sb3_logs")))
        yield
