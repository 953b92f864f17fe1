"""How much of the documentation site is experiment records: words per page of the built site.

    python tools/docs_word_share.py            # the share, and the largest pages

A page is built when it is a ``.md`` file under ``docs/`` that ``mkdocs.yml``'s ``exclude_docs``
(gitignore patterns) does not exclude; its words are those of its source with the files it
includes (``--8<-- "path"`` snippets) in place, counted as ``wc -w`` does. Pages under
``docs/experiments/`` are the records.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pathspec
import yaml

ROOT = Path(__file__).resolve().parents[1]
RECORDS = "experiments/"
SNIPPET = re.compile(r'^\s*--8<--\s+"([^"]+)"\s*$', re.MULTILINE)


def built_pages(root: Path = ROOT) -> list[Path]:
    """The ``.md`` files of ``docs/`` that mkdocs builds into pages, relative to ``docs/``."""
    config = yaml.safe_load((root / "mkdocs.yml").read_text())
    patterns = config.get("exclude_docs", "").split("\n")
    excluded = pathspec.GitIgnoreSpec.from_lines(patterns)
    docs = root / config.get("docs_dir", "docs")
    pages = [path.relative_to(docs) for path in sorted(docs.rglob("*.md"))]
    return [page for page in pages if not excluded.match_file(page.as_posix())]


def page_words(page: Path, root: Path = ROOT) -> int:
    """The words of a page's source with its snippets included."""
    text = (root / "docs" / page).read_text()
    text = SNIPPET.sub(lambda match: (root / match.group(1)).read_text(), text)
    return len(text.split())


def word_counts(root: Path = ROOT) -> dict[str, int]:
    """Words per built page, by its path under ``docs/``."""
    return {page.as_posix(): page_words(page, root) for page in built_pages(root)}


def records_share(counts: dict[str, int]) -> float:
    """The share of the words that are in ``docs/experiments/``."""
    total = sum(counts.values())
    records = sum(words for page, words in counts.items() if page.startswith(RECORDS))
    return records / total if total else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=8, help="how many of the largest pages to list")
    args = parser.parse_args()
    counts = word_counts()
    for page, words in sorted(counts.items(), key=lambda item: -item[1])[: args.top]:
        print(f"{words:>7,}  {page}")
    print(
        f"{sum(counts.values()):,} words in {len(counts)} pages; "
        f"experiment records {records_share(counts):.0%}"
    )


if __name__ == "__main__":
    main()
