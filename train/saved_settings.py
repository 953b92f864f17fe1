"""Settings that an older version saved (a run's ``config.json``), read in today's names, so that
``--resume`` and ``--config`` go on with what the older run was given
(:meth:`connectx_train.config.TrainConfig.from_json`)."""

from __future__ import annotations

from typing import Any

from connectx_train.teacher_books import upgrade_saved_books

__all__ = ["upgrade_saved_settings"]


def upgrade_saved_settings(saved: dict[str, Any]) -> dict[str, Any]:
    """Settings saved by an older version in today's names: the six book settings as one
    ``teacher_book`` list (:func:`connectx_train.teacher_books.upgrade_saved_books`) and ``vec_env``
    ``'auto'`` (subprocesses, a choice since removed) as ``'subproc'``."""
    data = upgrade_saved_books(saved)
    if data.get("vec_env") == "auto":
        data["vec_env"] = "subproc"
    return data
