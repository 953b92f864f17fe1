"""One resolver of ``"module:attr"`` entry points, used by the policy registry, the batch actors
and the file loaders: what it imports, and the one-line error naming what failed."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest

import connectx_gym.policy
from connectx_gym import files, registry
from connectx_gym.batch import BoardBatch, batch_actor
from connectx_gym.bitboard import Geometry
from connectx_gym.plugins import check_entry_point, load_entry_point
from connectx_gym.policy import BATCH_ACTORS, Policy, register_batch_actor


def test_it_imports_the_attribute_or_the_module() -> None:
    random_policy = connectx_gym.policy.RandomPolicy
    assert load_entry_point("connectx_gym.policy:RandomPolicy", "x") is random_policy
    assert load_entry_point("connectx_gym.policy", "x") is connectx_gym.policy
    assert load_entry_point("connectx_gym.policy:Policy.act", "x") is Policy.act
    entry = EntryPoint("random", "connectx_gym.policy:RandomPolicy", "connectx_gym.policies")
    assert load_entry_point(entry, "x") is connectx_gym.policy.RandomPolicy


@pytest.mark.parametrize(
    ("entry_point", "reason"),
    [
        ("connectx_no_such_module:thing", r"cannot be imported: No module named"),
        ("connectx_gym.policy:NoSuchPolicy", r"not found: connectx_gym.policy has no attribute"),
        ("connectx_gym.policy:Policy.nothing", r"no attribute Policy.nothing"),
    ],
)
def test_a_failure_is_one_import_error_naming_what_and_why(entry_point: str, reason: str) -> None:
    with pytest.raises(ImportError, match=reason) as caught:
        load_entry_point(entry_point, "policy 'ghost'")
    message = str(caught.value)
    assert message.startswith(f"cannot load policy 'ghost': entry point {entry_point!r}")
    assert "\n" not in message
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__


def test_an_installed_entry_point_names_its_package() -> None:
    entry = EntryPoint("ghost", "connectx_no_such_module:thing", "connectx_gym.policies")
    with pytest.raises(ImportError, match=r"\(declared by connectx_no_such_module\) cannot be"):
        load_entry_point(entry, "policy 'ghost'")


@pytest.mark.parametrize(
    "entry_point", ["", "module", "module:", ":attr", "a:b:c", "a-b:c", "a.:c", "a:b.c", "a :b"]
)
def test_check_refuses_what_is_not_module_colon_attr(entry_point: str) -> None:
    with pytest.raises(ValueError, match=r"^entry point of policy 'x' must look like 'module:a"):
        check_entry_point(entry_point, "policy 'x'")


def test_check_accepts_module_colon_attr() -> None:
    check_entry_point("a.b_c.d:Name", "policy 'x'")


# -- the three users ------------------------------------------------------------------------------
def test_the_registry_says_which_policy_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    registry.register_policy("ghost", "connectx_no_such_module:Ghost")
    with pytest.raises(ImportError, match=r"^cannot load policy 'ghost': entry point"):
        registry.make_policy("ghost")
    registry.register_policy("constant", "connectx_gym.plugins:POLICIES_GROUP")
    with pytest.raises(ImportError, match=r"policy 'constant'.* names a str, not a factory"):
        registry.make_policy("constant")


class _Unanswered(Policy):
    def act(self, board, rng: np.random.Generator) -> int:  # type: ignore[no-untyped-def]
        return 0


def _leftmost_batch(policy: Policy, batch: BoardBatch, rng: np.random.Generator) -> np.ndarray:
    return np.argmax(batch.legal(), axis=1)


def test_a_batch_actor_is_checked_when_registered_and_named_when_it_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = f"{_Unanswered.__module__}.{_Unanswered.__qualname__}"
    monkeypatch.setitem(BATCH_ACTORS, key, None)  # removed again after the test
    with pytest.raises(ValueError, match=r"batch actor of .*_Unanswered must look like"):
        register_batch_actor(_Unanswered, "no colon")
    register_batch_actor(_Unanswered, "connectx_no_such_module:act_batch")
    with pytest.raises(ImportError, match=r"^cannot load the batch actor of .*_Unanswered: entry"):
        batch_actor(_Unanswered())
    register_batch_actor(_Unanswered, f"{__name__}:_leftmost_batch")
    actor = batch_actor(_Unanswered())
    assert actor is not None
    empty = np.zeros(2, dtype=np.int64)
    batch = BoardBatch(Geometry(6, 7, 4), empty, empty, empty)
    assert actor(batch, np.random.default_rng(0)).tolist() == [0, 0]
    assert BATCH_ACTORS[key] is _leftmost_batch  # imported once


def test_a_file_loader_that_fails_names_its_suffix_and_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "FILE_LOADERS", {**files.FILE_LOADERS, ".ghost": "nowhere:load"})
    path = tmp_path / "agent.ghost"
    path.write_text("x")
    with pytest.raises(ImportError, match=r"^cannot load the \.ghost loader for .*agent\.ghost"):
        files.load_file(path)
