"""connectx_baselines.teacher_cache: the shipped labels equal what the run would label, are read
only where they apply, and a store round-trips through its file."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import connectx_baselines.teacher_labels as teacher_labels
import tools.teacher_cache as cache_tool
from connectx_baselines.teacher_cache import ChunkStore, exclusion_digest, shipped_store
from connectx_baselines.teacher_labels import (
    ChunkSettings,
    chunk_jobs,
    chunk_key,
    evaluation_keys,
    label_chunk,
    label_chunks,
    make_teacher_set,
)
from connectx_gym.bitboard import Geometry

SMALL = Geometry(4, 5, 3)
STANDARD = Geometry(6, 7, 4)


def no_labelling(*args: object) -> None:
    raise AssertionError("a chunk was labelled")


def small_store(count: int = 600) -> tuple[ChunkStore, list[tuple]]:
    """A store of the chunks of ``count`` positions on a small board (seed 2, no exclusion)."""
    settings = ChunkSettings(SMALL.key, 1, 0.35, 1_000_000)
    chunks = label_chunks(settings, count, 2, exclude=(), shipped=False)
    jobs = chunk_jobs(settings, count, 2, frozenset())
    keys = [chunk_key(job) for job in jobs]
    store = ChunkStore.from_chunks(keys, chunks, SMALL.cells, {"exclusion": exclusion_digest(())})
    return store, chunks


def assert_same_chunk(held: tuple, expected: tuple) -> None:
    assert held[0] == expected[0]
    assert held[2:] == expected[2:]
    np.testing.assert_array_equal(np.stack(held[1]), np.stack(expected[1]))


def test_a_store_round_trips_and_returns_each_chunk(tmp_path: Path) -> None:
    store, chunks = small_store()
    assert len(store) == 3  # 250 + 250 + 100
    store.save(tmp_path / "store.npz")
    loaded = ChunkStore.load(tmp_path / "store.npz")
    assert loaded.meta == store.meta
    for key, chunk in zip(store.keys, chunks, strict=True):
        assert_same_chunk(loaded.get(str(key)), chunk)
    assert loaded.get("no such chunk") is None


def test_a_store_needs_the_exclusion_digest() -> None:
    with pytest.raises(ValueError, match="exclusion digest"):
        ChunkStore.from_chunks([], [], SMALL.cells, {})


def test_the_shipped_labels_cover_both_presets_of_seed_0() -> None:
    store = shipped_store()
    assert store is not None
    assert store.meta["seed"] == 0
    assert store.meta["geometry"] == [6, 7, 4]
    assert len(store) == 800  # --preset strong's 200,000 positions; the default's are the first 120
    # made with today's evaluation positions excluded, so runs do read them
    assert store.exclusion == exclusion_digest(evaluation_keys(STANDARD))
    assert len(store.moves) == 200_000
    assert store.offsets[-1] == 200_000


@pytest.mark.slow
def test_a_shipped_chunk_equals_its_relabelling() -> None:
    settings = ChunkSettings(STANDARD.key, 8, 0.35, 1_000_000)
    jobs = chunk_jobs(settings, 200_000, 0, frozenset(evaluation_keys(STANDARD)))
    store = shipped_store()
    assert store is not None
    index = 417  # any chunk: each is seeded by its index alone
    assert_same_chunk(store.get(chunk_key(jobs[index])), label_chunk(*jobs[index]))


def test_a_run_of_seed_0_reads_the_shipped_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(teacher_labels, "label_chunk", no_labelling)
    lines: list[str] = []
    teacher = make_teacher_set(STANDARD, 500, 0, log=lines.append)
    assert 495 <= len(teacher) <= 500
    assert lines == ["teacher set: 2 of 2 chunks read from the shipped labels"]


def test_the_same_exclusion_given_explicitly_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(teacher_labels, "label_chunk", no_labelling)
    teacher = make_teacher_set(STANDARD, 250, 0, exclude=evaluation_keys(STANDARD))
    assert len(teacher) == 250


@pytest.mark.parametrize(
    "changes",
    [
        {"seed": 1},  # another run seed: other chunk seeds
        {"keep": 0.5},  # other settings
        {"exclude": ()},  # another exclusion, even an empty one
        {"shipped": False},
    ],
)
def test_the_shipped_chunks_are_not_read_where_they_do_not_apply(
    monkeypatch: pytest.MonkeyPatch, changes: dict
) -> None:
    monkeypatch.setattr(teacher_labels, "label_chunk", no_labelling)
    arguments = {"seed": 0, **changes}
    with pytest.raises(AssertionError, match="a chunk was labelled"):
        make_teacher_set(STANDARD, 250, **arguments)


def test_a_store_made_with_other_exclusions_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    store = shipped_store()
    assert store is not None
    other = dataclasses.replace(store, meta={**store.meta, "exclusion": "0" * 16})
    monkeypatch.setattr(teacher_labels, "shipped_store", lambda: other)
    monkeypatch.setattr(teacher_labels, "label_chunk", no_labelling)
    with pytest.raises(AssertionError, match="a chunk was labelled"):
        make_teacher_set(STANDARD, 250, 0)


def fake_chunk(settings: ChunkSettings, seed: int, count: int, exclude: frozenset) -> tuple:
    return [[3, 3, 2]] * count, [np.array([1, 0, 0, -1, 0, 0, 0], np.int8)] * count, 9, 1


def test_the_command_writes_a_store_and_checks_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(teacher_labels, "label_chunk", fake_chunk)
    monkeypatch.setattr(cache_tool, "label_chunk", fake_chunk)  # --check's
    out = tmp_path / "store.npz"
    arguments = ["--positions", "300", "--cache", str(tmp_path / "chunks"), "--out", str(out)]
    assert cache_tool.main(arguments) == 0
    store = ChunkStore.load(out)
    assert len(store) == 2  # 250 + 50
    assert store.meta["command"] == "python -m tools.teacher_cache " + " ".join(arguments)
    assert store.meta["exclusion"] == exclusion_digest(evaluation_keys(STANDARD))
    assert cache_tool.main([*arguments, "--check", "2"]) == 0
    assert "chunk 1: 50 positions equal" in capsys.readouterr().err
    monkeypatch.setattr(teacher_labels, "label_chunk", no_labelling)
    monkeypatch.setattr(cache_tool, "label_chunk", no_labelling)  # --check's
    with pytest.raises(AssertionError, match="a chunk was labelled"):
        cache_tool.main([*arguments, "--check", "1"])


def test_a_changed_chunk_fails_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(teacher_labels, "label_chunk", fake_chunk)
    monkeypatch.setattr(cache_tool, "label_chunk", fake_chunk)  # --check's
    out = tmp_path / "store.npz"
    arguments = ["--positions", "250", "--cache", str(tmp_path / "chunks"), "--out", str(out)]
    cache_tool.main(arguments)

    def other_chunk(*args: object) -> tuple:
        moves, values, games, skipped = fake_chunk(*args)  # type: ignore[arg-type]
        return moves, values, games + 1, skipped

    monkeypatch.setattr(teacher_labels, "label_chunk", other_chunk)
    monkeypatch.setattr(cache_tool, "label_chunk", other_chunk)  # --check's
    with pytest.raises(SystemExit, match="chunk 0 differs"):
        cache_tool.main([*arguments, "--check", "1"])


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--positions", "0"], "--positions must be >= 1"),
        (["--check", "-1"], "--check must be"),
        (["--check", "1", "--out", "missing.npz"], "no store to check at missing.npz"),
    ],
)
def test_the_command_refuses_bad_numbers(
    arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        cache_tool.main(arguments)
    assert message in capsys.readouterr().err
