"""The ``connectx`` command: results, and clean errors (one line, non-zero exit) on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest

from connectx_gym.cli import main
from connectx_gym.files import WeightsFile, save_weights


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse usage errors
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def tiny_weights(path: Path) -> Path:
    from connectx_gym import Geometry

    rng = np.random.default_rng(0)
    layers = [
        {"op": "flatten"},
        {"op": "linear", "weight": "w", "bias": "b"},
    ]
    params = {"w": rng.normal(size=(7, 84)), "b": np.zeros(7)}
    return save_weights(WeightsFile(Geometry(), layers, params), path)


def test_evaluate_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "evaluate", "onestep", "random", "--games", "6", "--json", "--seed", "3"
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["games"] == 6
    assert result["wins"] + result["draws"] + result["losses"] == 6
    assert result["wins"] >= 5
    low, high = result["ci95"]
    assert low - 1e-12 <= result["score"] <= high + 1e-12
    assert result["illegal_a"] == result["illegal_b"] == 0


def test_evaluate_text_and_saved_model(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    model = tiny_weights(tmp_path / "agent.npz")
    code, out, err = run(capsys, "evaluate", str(model), "random", "--games", "4")
    assert code == 0, err
    for expected in ("score", "95% CI", "ms per move", "illegal"):
        assert expected in out


@pytest.mark.slow
def test_tournament_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    png = tmp_path / "t.png"
    code, out, err = run(
        capsys,
        "tournament",
        "random",
        "onestep",
        "--games",
        "4",
        "--bootstrap",
        "50",
        "--png",
        str(png),
        "--json",
    )
    assert code == 0, err
    players = [p["player"] for p in json.loads(out)["players"]]
    assert players == ["onestep", "random"]
    assert png.exists()


def test_play_reads_moves_from_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Columns are numbered 1-4 for people: 0 and 9 are refused, as is a word.
    answers = iter(["9", "x", "0", "1", "q"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    code, out, err = run(
        capsys,
        "play",
        "--opponent",
        "random",
        "--seed",
        "1",
        "--rows",
        "1",
        "--columns",
        "4",
        "--inarow",
        "3",
    )
    assert code == 0, err
    assert out.count("not a legal column") == 3
    assert "legal: 1 2 3 4" in out
    assert "1 2 3 4\n" in out  # the column numbers under the board
    assert "X . . ." in out  # the move typed as 1 went into the first column
    assert "\x1b[" not in out  # no colour when stdout is not a terminal
    assert "bye" in out


def test_play_colours_the_discs_when_asked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = iter(["2", "q"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    code, out, err = run(capsys, "play", "--opponent", "random", "--color", "always")
    assert code == 0, err
    assert "\x1b[1;31mX\x1b[0m" in out
    assert "1 2 3 4 5 6 7" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["evaluate", "random", "nosuchpolicy"], "unknown policy"),
        (["evaluate", "random", "minimax:depth=3,bogus=1"], "does not take"),
        (["evaluate", "random", "missing_model.npz"], "no such"),
        (["evaluate", "random", "CORRUPT"], "not a connectx-gym weights file"),
        (["evaluate", "random", "random", "--games", "0"], "must be >= 1"),
        (["evaluate", "random", "random", "--games", "many"], "whole number"),
        (["evaluate", "random", "random", "--rows", "-2"], "must be >= 1"),
        (["tournament", "random", "--games", "2"], "at least two"),
        (["export-kaggle", "missing.zip", "-o", "OUT"], "no such"),
        (["export-kaggle", "CORRUPT", "-o", "OUT"], "not a connectx-gym weights file"),
        (["train", "--n-envs", "0", "--out", "OUT"], "n_envs must be >= 1"),
        (["train", "--opponent", "nosuchpolicy", "--out", "OUT"], "unknown policy"),
        (["train", "--resume", "--out", "OUT"], "nothing to resume"),
        (["nosuchcommand"], "invalid choice"),
        (["evaluate", "random", "random", "--games", "99999999999999999999"], "must be <="),
        (["evaluate", "random", "random", "--seed", "-1"], "must be >= 0"),
        (["evaluate", "random", "random", "--seed", "1e3"], "whole number"),
        (["evaluate", "random", "random", "--rows", "100", "--columns", "100"], "4096 cells"),
        (["evaluate", "random", "random", "--columns", "99999999999"], "must be <= 1024"),
        (["evaluate", "random", "x" * 300], "unknown policy"),
        (["evaluate", "random", "x" * 3000], "longer than 1024"),
        (["evaluate", "random", "minimax:depth=3,depth=4"], "given twice"),
        (["evaluate", "random", "random~nan"], "noise"),
        (["tournament", "random", "random", "--bootstrap", "-5"], "must be >= 0"),
        (["accuracy", "random", "--time-limit", "-1"], "finite number > 0"),
        (["accuracy", "random", "--time-limit", "nan"], "finite number > 0"),
        (["accuracy", "random", "--limit", "0"], "must be >= 1"),
        (["play", "--opponent", "nosuch"], "unknown policy"),
        (["play", "--rows", "0"], "must be >= 1"),
    ],
)
def test_bad_input_is_a_clean_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], message: str
) -> None:
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(b"\x00garbage")
    replacements = {"CORRUPT": str(corrupt), "OUT": str(tmp_path / "out")}
    argv = [replacements.get(a, a) for a in argv]
    argv = [str(tmp_path / a) if a.startswith("missing") else a for a in argv]
    code, _, err = run(capsys, *argv)
    assert code != 0
    assert message in err
    assert "Traceback" not in err
    ours = [line for line in err.splitlines() if line.startswith("connectx")]
    assert ours == [err.strip().splitlines()[-1]], err  # one line that says what is wrong
    assert "usage:" not in err


@pytest.mark.slow
def test_entry_point_and_light_imports() -> None:
    # `connectx evaluate` must not import torch; a bad spec exits non-zero without a traceback.
    code = (
        "import sys\n"
        "from connectx_gym.cli import main\n"
        "status = main(['evaluate', 'random', 'random', '--games', '2', '--json'])\n"
        "assert status == 0\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "assert main(['evaluate', 'random', 'bogus']) == 2\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    assert "Traceback" not in completed.stderr
    assert "unknown policy 'bogus'" in completed.stderr
    script = subprocess.run(
        [sys.executable, "-m", "connectx_gym.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert script.returncode == 0
    assert "export-kaggle" in script.stdout


def test_the_program_exits_with_the_commands_status_and_its_whole_output() -> None:
    # The program leaves its objects to the exit, not to the collector (gc.freeze): what it
    # prints still comes out whole, and its status is the command's.
    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "connectx"]
    assert script.value == "connectx_gym.cli:run_program"
    command = [sys.executable, "-m", "connectx_gym.cli", "evaluate", "random", "random"]
    done = subprocess.run(
        [*command, "--games", "2", "--json"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["games"] == 2
    bad = subprocess.run([*command[:-1], "bogus"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert "unknown policy 'bogus'" in bad.stderr


def test_accuracy_command(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("connectx_baselines.solver")
    code, out, err = run(capsys, "accuracy", "onestep", "--json")
    assert code == 0, err
    result = json.loads(out)["sets"]["games"]  # beside the random split's
    assert result["split"] == "test"
    overall = result["overall"]
    assert overall["positions"] == sum(p["positions"] for p in result["phases"].values())
    assert 0 <= overall["mistakes"] <= overall["positions"]


def test_accuracy_on_a_pons_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from connectx_baselines.solver import solve
    from connectx_gym import Board, Geometry

    # Pons' format (1-indexed columns, then the side to move's score), scored by our solver
    lines = []
    for moves in ("44455554221", "3333444", "1234567712345"):
        board = Board.from_moves(Geometry(), [int(c) - 1 for c in moves])
        lines.append(f"{moves} {solve(board)}")
    pons = tmp_path / "Test_tiny"
    pons.write_text("\n".join(lines) + "\n")
    code, out, err = run(capsys, "accuracy", "solver", "--pons", str(pons), "--json")
    assert code == 0, err
    overall = json.loads(out)["overall"]  # the labelled set's result type
    assert (overall["positions"], overall["perfect"], overall["mistakes"]) == (3, 3, 0)
    assert (overall["mistake_rate"], overall["mistake_ci95"][0], overall["unsolved"]) == (0, 0, 0)
    assert overall["critical"] is None  # Pons' files score the position, not every move
    code, out, err = run(capsys, "accuracy", "random", "--pons", str(pons))
    assert code == 0, err
    assert "random against perfect play" in out
    assert "| all | 3 |" in out


def test_help_lists_every_command_without_importing_any() -> None:
    from connectx_gym.cli import commands

    code = (
        "import sys\n"
        "from connectx_gym.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "loaded = [m for m in sys.modules if m.startswith(('train', 'baselines', 'torch',\n"
        "          'connectx_gym.commands.'))]\n"
        "assert not loaded, loaded\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    listed = commands()
    assert {"train", "accuracy", "export-kaggle", "export-onnx"} <= set(listed)  # entry points
    for name, command in listed.items():
        assert command.help, name
        assert name in completed.stdout
        assert command.help[:20] in completed.stdout.replace("\n", " ")


@pytest.mark.parametrize("name", ["train", "evaluate", "tournament", "play", "export-kaggle"])
def test_every_command_has_help(capsys: pytest.CaptureFixture[str], name: str) -> None:
    code, out, _ = run(capsys, name, "--help")
    assert code == 0
    assert f"connectx {name}" in out


def _options(command: str) -> dict[str, tuple[object, ...]]:
    """``--option`` -> what ``command``'s parser does with it (the type by name and what it
    the default, constant, choices and the action's class)."""
    from connectx_gym.cli import build_parser

    parser = build_parser(command)
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return {
        option: (
            getattr(action.type, "__qualname__", None),
            action.default,
            action.const,
            action.choices,
            type(action),
        )
        for action in sub._actions
        for option in action.option_strings
    }


def test_the_options_commands_share_are_declared_once() -> None:
    """``--seed``, ``--ray`` and ``--json`` mean the same in every command that plays games or
    answers positions; ``evaluate`` and ``tournament`` share the match's options too."""
    shared = ("--seed", "--ray", "--json")
    match = (*shared, "--games", "--openings", "--save-games", "--rows", "--columns", "--inarow")
    evaluate, tournament, accuracy = (_options(c) for c in ("evaluate", "tournament", "accuracy"))
    for option in match:
        assert evaluate[option] == tournament[option], option
    for option in shared:
        assert accuracy[option] == evaluate[option], option


def test_every_command_module_has_the_command_shape() -> None:
    from connectx_gym.cli import commands

    for name, command in commands().items():
        try:
            module = command.load()
        except ImportError:  # an extra that is not installed
            continue
        assert callable(module.add_arguments), name
        assert callable(module.run), name
        assert command.help == module.HELP, name  # the help read without importing


def test_noise_suffix_in_every_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, out, err = run(capsys, "evaluate", "onestep~0.25", "random~0.5", "--games", "2")
    assert code == 0, err
    assert "onestep~0.25" in out
    argv = ["tournament", "random", "onestep~0.5", "--games", "2", "--json"]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert {p["player"] for p in json.loads(out)["players"]} == {"random", "onestep~0.5"}
    monkeypatch.setattr("builtins.input", lambda prompt="": "q")
    code, out, err = run(capsys, "play", "--opponent", "random~0.1")
    assert code == 0, err
    assert "bye" in out


def test_play_with_closed_stdin_is_one_line() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "connectx_gym.cli", "play", "--opponent", "random"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 1
    assert "Traceback" not in completed.stderr
    assert completed.stderr.strip().splitlines() == ["connectx play: error: end of input"]


def test_unexpected_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("something\nbroke")

    monkeypatch.setattr("connectx_gym.match.play_match", explode)
    code, _, err = run(capsys, "evaluate", "random", "random")
    assert code == 1
    assert err.strip() == "connectx evaluate: error: RuntimeError: something broke"


def test_light_commands_never_import_torch(tmp_path: Path) -> None:
    model = tiny_weights(tmp_path / "agent.npz")
    exported = tmp_path / "main.py"
    code = (
        "import builtins, sys\n"
        "from connectx_gym.cli import main\n"
        "builtins.input = lambda prompt='': 'q'\n"
        f"assert main(['evaluate', 'random', {str(model)!r}, '--games', '2']) == 0\n"
        "assert main(['tournament', 'random', 'random~0.5', '--games', '2']) == 0\n"
        "assert main(['play', '--opponent', 'random']) == 0\n"
        f"assert main(['export-kaggle', {str(model)!r}, '-o', {str(exported)!r}]) == 0\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in\n"
        "         ('torch', 'stable_baselines3', 'sb3_contrib', 'tensorboard')]\n"
        "assert not heavy, heavy\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import connectx_gym

    code, out, err = run(capsys, "--version")
    assert code == 0, err
    assert out.strip() == f"connectx {connectx_gym.__version__}"


def test_version_has_one_source() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"]
    assert "version" in pyproject["project"]["dynamic"]
    attr = pyproject["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "connectx_gym.__version__"


def test_tournament_writes_a_picture_only_when_asked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "tournament", "random", "onestep", "--games", "2")
    assert code == 0, err
    assert list(tmp_path.iterdir()) == []
    pytest.importorskip("matplotlib")
    code, _, err = run(
        capsys, "tournament", "random", "onestep", "--games", "2", "--png", "ratings.png"
    )
    assert code == 0, err
    assert [p.name for p in tmp_path.iterdir()] == ["ratings.png"]
    png = (tmp_path / "ratings.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(png) > 10_000  # two plots and a key, not an empty canvas


def test_tournament_png_without_matplotlib_names_the_extra_before_playing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    png = tmp_path / "ratings.png"
    code, out, err = run(capsys, "tournament", "random", "onestep", "--png", str(png))
    assert code != 0
    assert out == ""  # no game was played
    assert len(err.strip().splitlines()) == 1
    assert "matplotlib" in err
    assert "connectx-gym[train]" in err
    assert not png.exists()


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_silences_progress_and_keeps_the_result(
    capsys: pytest.CaptureFixture[str], where: str
) -> None:
    argv = ["tournament", "random", "onestep", "--games", "2", "--bootstrap", "10", "--json"]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert err.startswith("[1/1] random vs onestep")  # progress goes to stderr
    assert json.loads(out)["players"][0]["player"] == "onestep"  # stdout stays parseable
    quiet = ["-q", *argv] if where == "before" else [*argv, "--quiet"]
    code, out, err = run(capsys, *quiet)
    assert code == 0, err
    assert err == ""
    assert json.loads(out)["players"][0]["player"] == "onestep"


def test_verbose_shows_debugging_details(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["evaluate", "random", "random", "--games", "2", "--json"]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert "debug:" not in err
    code, out, err = run(capsys, *argv, "-v")
    assert code == 0, err
    assert "debug: connectx " in err
    assert "evaluate from connectx_gym.commands.evaluate" in err
    assert json.loads(out)["games"] == 2


def test_quiet_and_verbose_together_are_refused_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(capsys, "-q", "evaluate", "random", "random", "--verbose")
    assert code == 2
    assert "not allowed with argument" in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "evaluate", "random", "random", "-v", "--quiet")
    assert code == 2
    assert "not allowed with argument" in err
    assert len(err.strip().splitlines()) == 1


def test_errors_stay_one_line_under_quiet(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "evaluate", "random", "nosuchpolicy", "-q")
    assert code == 2
    assert err.startswith("connectx evaluate: error: unknown policy")
    assert len(err.strip().splitlines()) == 1
