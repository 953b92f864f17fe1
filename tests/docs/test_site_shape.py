"""The docs site teaches: experiment records stay a minority of its words, and the CLI
reference is generated from the parsers of every registered command."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import yaml

from connectx_gym.cli import build_parser, commands
from tools.docs_word_share import built_pages, records_share, word_counts

ROOT = Path(__file__).resolve().parents[2]
MAX_RECORDS_SHARE = 0.30


def _hook() -> ModuleType:
    path = ROOT / "docs" / "hooks" / "cli_reference.py"
    spec = importlib.util.spec_from_file_location("cli_reference_hook", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_experiment_records_are_at_most_30_percent_of_the_words() -> None:
    counts = word_counts()
    assert "env.md" in counts
    assert "experiments/index.md" in counts
    share = records_share(counts)
    assert share <= MAX_RECORDS_SHARE, (
        f"experiment records are {share:.0%} of the site's {sum(counts.values()):,} words: "
        "move old logs to exclude_docs in mkdocs.yml and link them on GitHub"
    )


def test_records_share_counts_the_experiments_folder() -> None:
    assert records_share({"experiments/a.md": 30, "env.md": 70}) == 0.3
    assert records_share({}) == 0.0


def test_every_nav_page_is_built_and_every_built_page_is_in_the_nav() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [page for value in node.values() for page in pages(value)]
        if isinstance(node, list):
            return [page for item in node for page in pages(item)]
        return []

    in_nav = set(pages(config["nav"]))
    built = {page.as_posix() for page in built_pages()}
    assert in_nav == built
    first_level = {next(iter(item)) if isinstance(item, dict) else item for item in config["nav"]}
    assert not any("xperiment" in title for title in first_level)


def test_cli_reference_hook_is_registered_and_has_a_page() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert "docs/hooks/cli_reference.py" in config["hooks"]
    assert _hook().MARKER in (ROOT / "docs" / "cli.md").read_text()


def test_cli_reference_lists_every_command_with_its_options() -> None:
    hook = _hook()
    text = hook.cli_reference()
    for name in commands():
        assert f"## `connectx {name}`" in text
        assert f"usage: connectx {name}" in text
        sub = next(a for a in build_parser(name)._actions if a.dest == "command").choices[name]
        for action in sub._actions:
            for flag in action.option_strings:
                assert flag in text, (name, flag)
    assert "--timesteps" in text
    assert "--max-minutes" in text


def test_the_hook_leaves_pages_without_the_marker_alone() -> None:
    assert _hook().on_page_markdown("# a page\n", None, None, None) == "# a page\n"


README_LINK = re.compile(r"(!?)\[[^\]]*\]\(([^)\s]+)\)")
REPOSITORY = "https://github.com/connectx-gym/connectx-gym/blob/main/"
RAW = "https://raw.githubusercontent.com/connectx-gym/connectx-gym/main/"


def test_readme_links_work_on_a_package_index_page() -> None:
    """PyPI shows the README without the repository around it: every link and image is absolute,
    and those into this repository name files that exist."""
    links = README_LINK.findall((ROOT / "README.md").read_text())
    assert links
    for image, target in links:
        assert re.match(r"https?://", target), f"relative link in README.md: {target}"
        prefix = RAW if image else REPOSITORY
        if target.startswith(("https://github.com/connectx-gym/", RAW)):
            assert target.startswith(prefix), target
            path = target.removeprefix(prefix).split("#")[0]
            assert (ROOT / path).exists(), f"README.md links to a missing file: {path}"
