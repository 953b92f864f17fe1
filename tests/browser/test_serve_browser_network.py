"""The ``connectx serve`` page for RL users, in headless Chromium: the opponent picked from a list
(the networks first), and a network's move probabilities under the solver's scores, its top move
in red where the solver says it gives away value."""

from __future__ import annotations

import os
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("flask", reason='the serve extra is not installed: pip install ".[serve]"')
pytest.importorskip("playwright.sync_api", reason="pip install playwright")

from werkzeug.serving import make_server

from connectx_gym.bitboard import Board
from connectx_gym.files import SHIPPED_WEIGHTS
from connectx_gym.registry import make_policy
from connectx_gym.serve import create_app
from connectx_gym.serve.network import network_view
from tests.browser.test_serve_browser import (
    TIMEOUT_MS,
    browser,  # noqa: F401 (the fixture)
    wait_for_turn,
)
from tests.connectx_gym.serve.test_serve_network import SHIPPED_CHOICES

#: Where the screenshots go, to be looked at (desktop width, then a phone's 375 px).
SHOTS = Path(os.environ.get("CONNECTX_SHOTS", "/tmp"))
#: Red's columns (0-based) against ppo after which, on a proven position, ppo's favourite move
#: for red (column 3, 1-based) loses sooner than the solver's best (column 4).
RED_MOVES = [0, 2, 0, 0]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    models = tmp_path_factory.mktemp("models")
    (models / "nets").mkdir()
    shutil.copy(SHIPPED_WEIGHTS["ppo-v1"], models / "nets" / "mine.npz")
    app = create_app("minimax:depth=3", models=models)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.port}/"
    server.shutdown()


def open_page(browser, url: str, width: int, height: int):  # noqa: F811
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    page.wait_for_selector("#board .cell")
    page.wait_for_selector("#opponent-choice option", state="attached")
    return page, errors


def play_against_ppo(page) -> None:
    """Pick ppo from the list and play RED_MOVES, each after the server's answer."""
    page.select_option("#opponent-choice", "ppo-v1")
    assert page.input_value("#opponent") == "ppo-v1"
    assert "a network" in page.inner_text("#opponent-help")
    for column in RED_MOVES:
        wait_for_turn(page)
        before = page.locator("#board .disc.p1, #board .disc.p2").count()
        page.click(f"#board .head[data-column='{column}']")
        page.wait_for_function(
            f"document.querySelectorAll('#board .disc.p1, #board .disc.p2').length >= {before + 2}"
        )
    wait_for_turn(page)
    page.wait_for_selector("#probs .prob.top")
    page.wait_for_selector("#analysis-note.proven")


def test_the_list_offers_ppo_first_and_follows_the_typed_spec(browser, url: str) -> None:  # noqa: F811
    page, errors = open_page(browser, url, 1200, 800)
    try:
        options = page.locator("#opponent-choice option").all_inner_texts()
        assert options[: len(SHIPPED_CHOICES) + 1] == [*SHIPPED_CHOICES, "nets/mine.npz"]
        assert options[-1] == "other (typed)"
        groups = page.locator("#opponent-choice optgroup").evaluate_all(
            "groups => groups.map(g => g.label)"
        )
        assert groups == ["Networks", "Search and other policies", "Agents"]
        assert page.input_value("#opponent-choice") == ""  # minimax:depth=3 is typed, not listed
        page.select_option("#opponent-choice", "minimax")
        help_text = page.inner_text("#opponent-help")
        assert "depth (3, \u2264 7)" in help_text
        assert "e.g. minimax:depth=3" in help_text
        page.fill("#opponent", "mcts:net=ppo,simulations=200")
        page.dispatch_event("#opponent", "input")
        assert page.input_value("#opponent-choice") == ""  # free text is still a spec
    finally:
        page.close()
    assert not errors, errors


def test_ppo_shows_its_move_probabilities_beside_the_solvers_scores(browser, url: str) -> None:  # noqa: F811
    page, errors = open_page(browser, url, 1200, 800)
    try:
        play_against_ppo(page)
        probs = page.locator("#probs .prob")
        scores = page.locator("#scores .score")
        assert probs.count() == scores.count() == 7
        shown = [text.strip() for text in probs.all_inner_texts()]
        assert all(text.endswith("%") for text in shown), shown
        assert 97 <= sum(int(text.lstrip("<").rstrip("%")) for text in shown) <= 103
        for column in range(7):  # each probability sits under its column's score
            score = scores.nth(column).bounding_box()
            prob = probs.nth(column).bounding_box()
            assert score is not None
            assert prob is not None
            assert abs(score["x"] - prob["x"]) < 1
            assert prob["y"] >= score["y"] + score["height"] - 1
        # ppo's favourite (column 3) loses sooner than the solver's best: it is shown in red.
        top = page.locator("#probs .prob.top")
        assert top.get_attribute("data-column") == "2"
        assert "worse" in (top.get_attribute("class") or "")
        assert page.get_attribute("#scores .score.best", "data-column") == "3"
        color = top.evaluate("node => getComputedStyle(node).color")
        assert color == "rgb(192, 32, 32)"
        note = page.inner_text("#network-note")
        assert note.startswith("ppo-v1 plays column 3")
        assert "the solver prefers 4" in note
        assert "Its value" not in note  # ppo-v1 has no value head: probabilities only
        assert "value head" in page.inner_text("#analysis")  # the legend says which have one
        page.screenshot(path=str(SHOTS / "serve_rl.png"))
        # A new game clears the network's view with the scores, until it is asked again.
        page.click("#new-game")
        page.wait_for_function("!document.querySelector('#probs .prob.worse')")
    finally:
        page.close()
    assert not errors, errors


def test_a_network_with_a_value_head_shows_its_value(browser, url: str) -> None:  # noqa: F811
    page, errors = open_page(browser, url, 1200, 800)
    try:
        page.select_option("#opponent-choice", "ppo")
        wait_for_turn(page)
        page.wait_for_selector("#probs .prob.top")
        note = page.inner_text("#network-note")
        assert note.startswith("ppo plays column "), note
        match = re.search(r"Its value for the player to move: ([+\u2212])(\d\.\d\d) ", note)
        assert match is not None, note
        sign = -1.0 if match.group(1) == "\u2212" else 1.0
        shown = sign * float(match.group(2))
        view = network_view(make_policy("ppo"), Board.empty())  # the position the page shows
        assert view is not None
        assert shown == pytest.approx(view["value"], abs=0.005)
    finally:
        page.close()
    assert not errors, errors


def test_the_networks_view_fits_a_phone_screen(browser, url: str) -> None:  # noqa: F811
    page, errors = open_page(browser, url, 375, 740)
    try:
        play_against_ppo(page)
        width, inner = page.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
        assert width <= inner == 375  # no horizontal scroll
        last = page.locator("#probs .prob[data-column='6']").bounding_box()
        assert last is not None
        assert last["x"] + last["width"] <= 375
        page.screenshot(path=str(SHOTS / "serve_rl_375.png"), full_page=True)
    finally:
        page.close()
    assert not errors, errors
