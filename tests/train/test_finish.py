"""The final panel's mistake rates: the test split of the shipped labelled positions unless a run
asks for the dev split (``--report-split dev``), which leaves the test split unread."""

from __future__ import annotations

import pytest

pytest.importorskip("sb3_contrib")

from connectx_baselines.position_sets import load_positions
from connectx_gym.files import SHIPPED_WEIGHTS, load_weights
from connectx_train.config import TrainConfig
from connectx_train.finish import play_final_panel


@pytest.mark.parametrize("split", ["test", "dev"])
def test_the_final_panel_reads_the_split_the_run_names(split: str) -> None:
    config = TrainConfig(panel=("random",), final_games=2, report_split=split)
    config.validate()
    lines: list[str] = []
    final = play_final_panel(config, load_weights(SHIPPED_WEIGHTS["ppo"]), lines.append)
    rates = final["perfect_play"]
    assert rates["split"] == split
    assert rates["overall"]["positions"] == len(load_positions(split=split))  # 717 or 716
    assert set(final["results"]) == {"random"}


def test_the_report_split_is_test_by_default_and_nothing_else_is_taken() -> None:
    assert TrainConfig().report_split == "test"
    with pytest.raises(ValueError, match="report_split must be one of test, dev, got 'train'"):
        TrainConfig(report_split="train").validate()
