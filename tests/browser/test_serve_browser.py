"""The ``connectx serve`` page in a real headless Chromium (Playwright driving the system browser).

Skipped, with the reason, only when Playwright or a Chromium binary is missing or cannot start:
``pip install playwright`` and ``apt-get install -y chromium`` (or set ``CONNECTX_CHROMIUM`` to a
Chromium/Chrome executable). Playwright's own browser download is not needed.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("flask", reason='the serve extra is not installed: pip install ".[serve]"')
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")

from werkzeug.serving import make_server  # noqa: E402

from connectx_gym.bitboard import Board, Geometry  # noqa: E402
from connectx_gym.serve import create_app  # noqa: E402

TIMEOUT_MS = 60_000  # the first searches compile or load numba kernels


def chromium_path() -> str | None:
    candidates = [os.environ.get("CONNECTX_CHROMIUM")]
    candidates += [shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")]
    return next((path for path in candidates if path), None)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    server = make_server("127.0.0.1", 0, create_app("onestep"), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.port}/"
    server.shutdown()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    path = chromium_path()
    if path is None:
        pytest.skip("no Chromium: apt-get install -y chromium (or set CONNECTX_CHROMIUM)")
    with sync_api.sync_playwright() as playwright:
        try:
            chromium = playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])
        except Exception as error:  # any failure to start the browser is a reason to skip
            pytest.skip(f"Chromium at {path} does not start: {str(error).splitlines()[0]}")
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, url: str):
    page = browser.new_page(viewport={"width": 1000, "height": 700})
    page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    page.wait_for_selector("#board .cell")
    yield page
    page.close()
    assert not errors, errors


def new_game(page, rows: int, columns: int, inarow: int, side: int = 1, opponent: str = "") -> None:
    page.fill("#rows", str(rows))
    page.fill("#columns", str(columns))
    page.fill("#inarow", str(inarow))
    page.select_option("#side", str(side))
    if opponent:
        page.fill("#opponent", opponent)
    page.click("#new-game")
    page.wait_for_function(f"document.querySelectorAll('#board .cell').length === {rows * columns}")


def wait_for_turn(page) -> None:
    """Until the game is over or the page takes a click: your move, and no answer awaited."""
    page.wait_for_function(
        "!document.querySelector('#board').classList.contains('busy') && ("
        "document.querySelector('#board').classList.contains('over') || "
        "document.querySelector('#status').textContent.startsWith('Your move'))"
    )


def is_over(page) -> bool:
    return page.evaluate("document.querySelector('#board').classList.contains('over')")


def discs(page) -> int:
    return page.locator("#board .disc.p1, #board .disc.p2").count()


def test_columns_are_numbered_from_one(page) -> None:
    heads = page.locator("#board .head").all_inner_texts()
    assert heads == ["1", "2", "3", "4", "5", "6", "7"]


def test_play_a_game_to_its_end_by_clicking(page) -> None:
    # On 4x5 boards with 3 in a row the solver proves every position at once: following the
    # analysis panel's best column, the person (red, first) beats onestep.
    new_game(page, 4, 5, 3)
    for _ in range(20):
        wait_for_turn(page)
        if is_over(page):
            break
        page.wait_for_selector("#scores .score.best")
        column = page.get_attribute("#scores .score.best", "data-column")
        before = discs(page)
        page.click(f"#board .cell[data-column='{column}'] >> nth=0")
        page.wait_for_function(
            f"document.querySelectorAll('#board .disc.p1, #board .disc.p2').length > {before}"
        )
    assert is_over(page)
    assert page.inner_text("#status") == "You win!"
    assert page.locator("#board .disc.win").count() >= 3  # the win line is highlighted
    assert page.locator("#board .disc.last").count() == 1  # and the last move marked
    assert page.inner_text("#analysis-note") == "The game is over."
    clicks = discs(page)
    page.click("#board .head >> nth=0")  # clicks after the end change nothing
    page.wait_for_timeout(200)
    assert discs(page) == clicks


def test_analysis_panel_shows_exact_scores(page) -> None:
    new_game(page, 4, 5, 3)
    wait_for_turn(page)
    page.wait_for_selector("#analysis-note.proven")
    assert "exact scores from the solver" in page.inner_text("#analysis-note")
    scores = page.locator("#scores .score").all_inner_texts()
    assert len(scores) == 5
    assert all(text.lstrip("+\u2212").isdigit() for text in scores)
    assert page.locator("#scores .score.best").count() >= 1


def test_analysis_notes_an_unproven_position(page) -> None:
    page.fill("#budget", "0.1")
    new_game(page, 6, 7, 4)
    # The note of this game's analysis, not one left from the page's first (1 s) analysis.
    page.wait_for_function(
        "document.querySelector('#analysis-note').textContent.includes('not proven within 0.1 s')"
    )
    assert page.locator("#analysis-note.unproven").count() == 1
    assert page.locator("#scores .score.estimate").count() == 7


def test_a_new_game_clears_the_previous_analysis_at_once(page) -> None:
    # The page's first game is analysed with the default 1 s budget (unproven on an empty 6x7).
    page.wait_for_function(
        "document.querySelector('#analysis-note').textContent.includes('not proven within 1 s')"
    )
    # newGame() runs up to its first await inside the click: read the note in the same task.
    note = page.evaluate(
        "() => { document.querySelector('#new-game').click();"
        " const note = document.querySelector('#analysis-note');"
        " return [note.textContent, note.className,"
        " document.querySelectorAll('#scores .score').length]; }"
    )
    assert note == ["\u2014", "", 0]


def test_undo_and_playing_second(page) -> None:
    new_game(page, 6, 7, 4, side=2)
    page.wait_for_function(
        "document.querySelector('#status').textContent.startsWith('Your move (yellow)')"
    )
    assert discs(page) == 1  # the opponent (red) opened
    assert "yellow" in page.inner_text("#status")
    page.click("#board .head[data-column='0']")
    page.wait_for_function(
        "document.querySelectorAll('#board .disc.p1, #board .disc.p2').length === 3"
    )
    wait_for_turn(page)
    page.click("#undo")
    page.wait_for_function(
        "document.querySelectorAll('#board .disc.p1, #board .disc.p2').length === 1"
    )
    assert page.locator("#board .disc.p2").count() == 0


def test_a_bad_board_size_shows_the_servers_message(page) -> None:
    page.fill("#rows", "30")
    page.click("#new-game")
    page.wait_for_selector("#status.error")
    assert "rows must be between 1 and 24" in page.inner_text("#status")


def test_replay_a_saved_game_step_by_step(page, tmp_path: Path) -> None:
    wins = [3, 2, 3, 2, 3, 2, 3]
    long = [0, 1, 1, 2, 2, 3, 2, 3, 3, 6, 3]
    assert Board.from_moves(Geometry(), long).winner() == 1
    records = [
        {
            "rows": 6,
            "columns": 7,
            "inarow": 4,
            "players": ["minimax:depth=3", "random"],
            "moves": wins,
            "opening_plies": 2,
            "winner": 1,
            "game": 0,
            "seed": 7,
        },
        {
            "rows": 6,
            "columns": 7,
            "inarow": 4,
            "players": ["random", "onestep"],
            "moves": long,
            "opening_plies": 2,
            "winner": 1,
            "game": 1,
            "seed": 8,
        },
    ]
    games = tmp_path / "games.jsonl"
    games.write_text("".join(json.dumps(record) + "\n" for record in records))
    page.click("#tab-replay")
    page.set_input_files("#games-file", str(games))
    page.wait_for_function("document.querySelector('#status').textContent.includes('move 0 of 7')")
    assert "minimax:depth=3" in page.inner_text("#game-info")
    for ply in range(1, 8):
        page.click("#next")
        page.wait_for_function(
            f"document.querySelector('#status').textContent.includes('move {ply} of 7')"
        )
        assert discs(page) == ply
    assert page.inner_text("#status").startswith("red wins")
    assert page.locator("#board .disc.win").count() == 4
    page.click("#prev")
    page.wait_for_function("document.querySelector('#status').textContent.includes('move 6 of 7')")
    assert page.locator("#board .disc.win").count() == 0
    page.select_option("#game-select", "1")
    page.click("#last")
    page.wait_for_function(
        "document.querySelector('#status').textContent.includes('move 11 of 11')"
    )
    assert page.locator("#board .disc.win").count() == 4
    page.click("#board .head >> nth=0")  # replay does not take moves
    page.wait_for_timeout(200)
    assert discs(page) == 11


def test_replay_shows_a_game_lost_by_an_illegal_answer(page, tmp_path: Path) -> None:
    record = {
        "rows": 6,
        "columns": 7,
        "inarow": 4,
        "players": ["a.py", "random"],
        "moves": [3, 3, 2],
        "opening_plies": 2,
        "winner": 1,
        "illegal": 2,
        "game": 0,
    }
    games = tmp_path / "illegal.jsonl"
    games.write_text(json.dumps(record) + "\n")
    page.click("#tab-replay")
    page.set_input_files("#games-file", str(games))
    page.wait_for_function("document.querySelector('#status').textContent.includes('move 0 of 3')")
    page.click("#next")
    page.wait_for_function("document.querySelector('#status').textContent.includes('opening')")
    page.click("#last")
    page.wait_for_function("document.querySelector('#status').textContent.includes('illegal')")
    assert page.inner_text("#status").startswith("red wins: yellow answered an illegal move")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"rows": 6}\n', "line 1 is not a saved game"),
        ("not json\n", "line 1 is not JSON"),
        ('{"rows": 1, "columns": 2, "inarow": 2, "moves": [0, 0]}\n', "full column"),
    ],
)
def test_replay_refuses_a_file_that_is_not_saved_games(page, tmp_path: Path, text, message) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(text)
    page.click("#tab-replay")
    page.set_input_files("#games-file", str(bad))
    page.wait_for_selector("#status.error")
    assert message in page.inner_text("#status")


def test_an_unknown_opponent_is_reported_and_can_be_replaced(page) -> None:
    new_game(page, 6, 7, 4, side=2, opponent="nosuch")
    page.wait_for_selector("#status.error")
    assert "unknown policy 'nosuch'" in page.inner_text("#status")
    page.fill("#opponent", "random")
    page.dispatch_event("#opponent", "change")
    page.wait_for_function(
        "document.querySelector('#status').textContent.startsWith('Your move (yellow)')"
    )
    assert discs(page) == 1


def test_a_click_right_after_a_new_opponent_is_played(page) -> None:
    wait_for_turn(page)
    # The opponent changed and a column clicked in one task: the position stays, so the click
    # must not be lost to a refresh of it.
    page.evaluate(
        "() => { const spec = document.querySelector('#opponent'); spec.value = 'random';"
        " spec.dispatchEvent(new Event('change'));"
        " document.querySelector('#board .head[data-column=\"3\"]').click(); }"
    )
    page.wait_for_function(
        "document.querySelectorAll('#board .disc.p1, #board .disc.p2').length === 2"
    )
    assert page.evaluate("game.opponent") == "random"


def test_a_refused_position_leaves_the_board_taking_clicks(page) -> None:
    wait_for_turn(page)
    page.route(
        "**/api/state",
        lambda route: route.fulfill(
            status=503, content_type="application/json", body='{"error": "the server is busy"}'
        ),
    )
    page.click("#board .head[data-column='3']")
    page.wait_for_selector("#status.error")
    assert "the server is busy" in page.inner_text("#status")
    assert not page.evaluate("document.querySelector('#board').classList.contains('busy')")
    page.unroute("**/api/state")
    page.click("#board .head[data-column='3']")  # the same click, answered this time
    page.wait_for_function(
        "document.querySelectorAll('#board .disc.p1, #board .disc.p2').length === 2"
    )


def test_a_double_click_plays_one_move(page) -> None:
    moves: list[str] = []
    page.on("request", lambda request: "/api/move" in request.url and moves.append(request.url))
    wait_for_turn(page)
    # Two clicks in one task: the second comes before the server answered for the first.
    page.evaluate(
        "() => { const head = document.querySelector('#board .head[data-column=\"3\"]');"
        " head.click(); head.click(); }"
    )
    page.wait_for_function(
        "document.querySelectorAll('#board .disc.p1, #board .disc.p2').length === 2"
    )
    wait_for_turn(page)
    # And a real double click, as a person makes it.
    page.dblclick("#board .cell[data-column='2'] >> nth=0")
    page.wait_for_function(
        "document.querySelectorAll('#board .disc.p1, #board .disc.p2').length === 4"
    )
    wait_for_turn(page)
    page.wait_for_timeout(300)
    assert page.locator("#board .disc.p1").count() == 2  # the person's two discs
    assert page.locator("#board .disc.p2").count() == 2  # and the opponent's two replies
    assert len(moves) == 2  # the server chose both of the opponent's moves
    assert page.inner_text("#move-log").startswith("Moves (1-based): 4 ")


def test_the_page_fits_a_phone_screen(browser, url: str, tmp_path: Path) -> None:
    phone = browser.new_page(viewport={"width": 375, "height": 740})
    phone.set_default_timeout(TIMEOUT_MS)
    try:
        phone.goto(url)
        phone.wait_for_selector("#board .cell")
        wait_for_turn(phone)
        shot = tmp_path / "phone.png"
        phone.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 0
        width, inner = phone.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
        assert width <= inner == 375  # no horizontal scroll
        last = phone.locator("#board .head[data-column='6']").bounding_box()
        assert last is not None
        assert last["x"] + last["width"] <= 375  # the seventh column is on screen
        phone.click("#board .head[data-column='6']")  # and plays
        phone.wait_for_function(
            "document.querySelectorAll('#board .disc.p1, #board .disc.p2').length === 2"
        )
        # Larger boards scale down too.
        new_game(phone, 12, 20, 4)
        width, inner = phone.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
        assert width <= inner
    finally:
        phone.close()


def test_the_page_keeps_one_analysis_in_flight_and_analyses_the_latest_position(page) -> None:
    # In the page itself: the analysis requests in flight, and the discs of each one's position.
    page.evaluate(
        """() => {
          window.analyses = { now: 0, most: 0, discs: [] };
          const original = window.fetch;
          window.fetch = async (url, options) => {
            const counted = String(url).includes("/api/analyse");
            if (counted) {
              analyses.now++;
              analyses.most = Math.max(analyses.most, analyses.now);
              analyses.discs.push(JSON.parse(options.body).board.filter((c) => c !== 0).length);
            }
            try { return await original(url, options); } finally { if (counted) analyses.now--; }
          };
        }"""
    )
    page.fill("#budget", "0.5")
    new_game(page, 6, 7, 4, opponent="random")
    for move, column in enumerate((3, 3, 2), start=1):  # quicker than analyses of half a second
        wait_for_turn(page)
        page.click(f"#board .head[data-column='{column}']")
        page.wait_for_function(  # the move and random's reply are on the board
            f"document.querySelectorAll('#board .disc.p1, #board .disc.p2').length === {2 * move}"
        )
    page.wait_for_function("document.querySelector('#analysis-note').textContent.includes('s).')")
    assert page.evaluate("window.analyses.most") == 1
    analysed = page.evaluate("window.analyses.discs")
    assert analysed[-1] == 6  # the latest position was analysed, positions left meanwhile not all


XSS_NAME = '<img src=x onerror="window.injected = (window.injected || 0) + 1">'


def test_saved_games_cannot_put_markup_into_the_page(page, tmp_path: Path) -> None:
    """Every string of a saved game is shown as text: an ``<img onerror>`` never runs."""
    record = {
        "rows": 6,
        "columns": 7,
        "inarow": 4,
        "players": [XSS_NAME, "<b>bold</b>"],
        "moves": [3, 2],
        "winner": 0,
        "game": XSS_NAME,
        "seed": XSS_NAME,
    }
    games = tmp_path / "games.jsonl"
    games.write_text(json.dumps(record) + "\n")
    page.click("#tab-replay")
    page.set_input_files("#games-file", str(games))
    page.wait_for_function(
        "document.querySelectorAll('#board .disc.p1, #board .disc.p2').length === 0"
    )
    page.wait_for_timeout(300)  # an injected image would have failed to load by now
    assert page.evaluate("window.injected") is None
    assert page.locator("img").count() == 0
    assert page.locator("#replay-controls b").count() == 0
    option = page.inner_text("#game-select option")
    assert option.startswith(f"#{XSS_NAME}: {XSS_NAME} vs <b>bold</b>")
    assert XSS_NAME in page.inner_text("#game-info")


def test_a_long_message_wraps_on_a_phone_screen(browser, url: str) -> None:
    phone = browser.new_page(viewport={"width": 375, "height": 740})
    phone.set_default_timeout(TIMEOUT_MS)
    try:
        phone.goto(url)
        phone.wait_for_selector("#board .cell")
        wait_for_turn(phone)
        new_game(phone, 6, 7, 4, side=2, opponent="x" * 280)  # its move: an unbroken error
        phone.wait_for_selector("#status.error")
        assert "x" * 280 in phone.inner_text("#status")
        width, inner = phone.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
        assert width <= inner == 375
    finally:
        phone.close()


def test_undo_right_after_a_click_takes_back_that_click_only(page) -> None:
    new_game(page, 6, 7, 4, opponent="random")
    wait_for_turn(page)
    page.click("#board .head[data-column='0']")
    page.wait_for_function(
        "document.querySelectorAll('#board .disc.p1, #board .disc.p2').length === 2"
    )
    wait_for_turn(page)
    before = page.inner_text("#move-log")
    # A click and an undo in one task: the undo comes before the server answered for the click.
    page.evaluate(
        "() => { document.querySelector('#board .head[data-column=\"3\"]').click();"
        " document.querySelector('#undo').click(); }"
    )
    page.wait_for_timeout(500)
    wait_for_turn(page)
    assert page.inner_text("#move-log") == before  # the first pair is still on the board
    assert discs(page) == 2
