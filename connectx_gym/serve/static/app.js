// The connectx serve page: play against a policy, replay saved games, analyse positions.
// The rules live on the server: every position is sent to /api/state (whose turn, legal columns,
// winner and its line), /api/move (the opponent's reply), /api/analyse (the solver's scores) and
// /api/network (a network opponent's move probabilities, shown under the solver's scores).
// The page shows only positions the server answered for: a click asks for the position after it,
// and while that or the opponent's move is in flight (game.busy) further clicks are ignored.
// Text reaches the page only as text (textContent, element()): never as markup, whatever a saved
// game or the server says.
"use strict";

const $ = (id) => document.getElementById(id);
const NAMES = { 1: "red", 2: "yellow" };

const game = {
  mode: "play",      // "play" or "replay"
  rows: 6, columns: 7, inarow: 4,
  moves: [],         // 0-based columns, in order
  target: [],        // the moves of the position last asked for (undo starts from it)
  human: 1,          // the mark the person plays (play mode)
  opponent: "",
  state: null,       // the server's answer for the position of game.moves
  busy: false,       // a move (yours or the opponent's) is in flight: input is ignored
  generation: 0,     // bumps on every change, so stale answers are dropped
  saved: [],         // games of the opened .jsonl file
  choices: [],       // the opponents the server offers (GET /api/policies)
  networkless: new Set(),  // specs the server said have no network: not asked again
};

// What the analysis panel shows of the position on the board: the solver's answer and the
// opponent network's view (each null until it comes).
const view = { scores: null, network: null };

async function api(path, body) {
  const response = await fetch(path, {
    method: body === undefined ? "GET" : "POST",
    headers: { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data;
  try { data = await response.json(); } catch { data = { error: response.statusText }; }
  if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
  return data;
}

function element(tag, className = "", text = undefined, data = {}) {
  // A new element with these classes, text (as text) and data-* attributes.
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  Object.assign(node.dataset, data);
  return node;
}

function flatBoard(moves = game.moves) {
  // Discs dropped column by column: row 0 is the top, as Kaggle lays out the board.
  const { rows, columns } = game;
  const cells = new Array(rows * columns).fill(0);
  const height = new Array(columns).fill(0);
  moves.forEach((column, index) => {
    const row = rows - 1 - height[column]++;
    cells[row * columns + column] = index % 2 === 0 ? 1 : 2;
  });
  return cells;
}

function position(moves = game.moves) {
  return { board: flatBoard(moves), rows: game.rows, columns: game.columns, inarow: game.inarow };
}

function setStatus(text, isError = false) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

function lastCell() {
  if (!game.moves.length) return -1;
  const column = game.moves[game.moves.length - 1];
  const above = game.moves.filter((c) => c === column).length;
  return (game.rows - above) * game.columns + column;
}

function fitCells() {
  // Cells of up to 60 px, smaller on large boards and on narrow screens (a phone's 375 px):
  // the board and the scores under it always fit the page's width.
  const { rows, columns } = game;
  const width = $("layout").clientWidth - 12;  // the board's padding
  const cell = Math.max(8, Math.min(60, Math.floor(600 / Math.max(columns, rows)),
    Math.floor(width / columns)));
  document.documentElement.style.setProperty("--cell", `${cell}px`);
}

function drawBoard() {
  const { rows, columns } = game;
  const board = $("board");
  fitCells();
  board.style.gridTemplateColumns = `repeat(${columns}, var(--cell))`;
  const cells = flatBoard();
  const line = new Set((game.state ? game.state.line : []).map(([r, c]) => r * columns + c));
  const last = lastCell();
  const parts = [];
  for (let c = 0; c < columns; c++) {
    parts.push(element("div", cells[c] ? "head full" : "head", String(c + 1), { column: c }));
  }
  for (let i = 0; i < rows * columns; i++) {
    const mark = cells[i];
    const classes = ["disc", mark ? `p${mark}` : "", i === last ? "last" : "", line.has(i) ? "win" : ""];
    const cell = element("div", "cell", undefined, { column: i % columns, index: i });
    cell.append(element("div", classes.join(" ").trim()));
    parts.push(cell);
  }
  board.replaceChildren(...parts);
  board.classList.toggle("over", Boolean(game.state && game.state.terminal));
  board.classList.toggle("busy", game.busy);
  board.classList.toggle("replay", game.mode === "replay");
  $("scores").style.gridTemplateColumns = `repeat(${columns}, var(--cell))`;
  $("move-log").textContent = game.moves.length
    ? `Moves (1-based): ${game.moves.map((c) => c + 1).join(" ")}` : "";
}

function describeState() {
  const s = game.state;
  if (!s) return;
  if (game.mode === "replay") {
    const saved = currentSaved() || { moves: [] };
    const total = saved.moves.length;
    const opening = game.moves.length && game.moves.length <= (saved.opening_plies || 0) ? ", opening" : "";
    const where = `move ${game.moves.length} of ${total}${opening}`;
    if (s.terminal) setStatus(s.winner ? `${NAMES[s.winner]} wins (${where})` : `draw (${where})`);
    else if (game.moves.length === total && saved.illegal) {
      setStatus(`${NAMES[3 - saved.illegal]} wins: ${NAMES[saved.illegal]} answered an illegal move (${where})`);
    } else setStatus(`${NAMES[s.to_move]} to move (${where})`);
    return;
  }
  if (s.terminal) {
    if (!s.winner) setStatus("Draw.");
    else setStatus(s.winner === game.human ? "You win!" : `${game.opponent} wins.`);
  } else if (s.to_move === game.human) {
    setStatus(`Your move (${NAMES[game.human]}): click a column.`);
  } else {
    setStatus(`${game.opponent} is thinking…`);
  }
}

async function refresh(moves = game.moves) {
  // Show the position after `moves` once the server has answered for it (a newer refresh, undo
  // or new game drops this answer).
  const generation = ++game.generation;
  game.busy = true;
  game.target = moves;
  $("board").classList.add("busy");  // the board says it takes no click until the answer
  let state;
  try {
    state = await api("/api/state", position(moves));
  } catch (error) {
    if (generation === game.generation) {
      Object.assign(game, { busy: false, target: game.moves });
      $("board").classList.remove("busy");
      setStatus(error.message, true);
    }
    return;
  }
  if (generation !== game.generation) return;
  await show(generation, moves, state);
}

async function show(generation, moves, state) {
  Object.assign(game, { moves, target: moves, state, busy: false });
  drawBoard();
  describeState();
  analyse(generation);
  if (game.mode === "play" && !state.terminal && state.to_move !== game.human) {
    await opponentMove(generation);
  }
}

async function opponentMove(generation) {
  game.busy = true;
  drawBoard();
  let answer;
  try {
    answer = await api("/api/move", { ...position(), mark: game.state.to_move, opponent: game.opponent });
  } catch (error) {
    if (generation === game.generation) {
      game.busy = false;
      drawBoard();
      setStatus(`${game.opponent}: ${error.message}`, true);
    }
    return;
  }
  if (generation !== game.generation) return;
  await show(generation, [...game.moves, answer.column], answer.state);
}

function showScores(answer) {
  view.scores = answer;
  const parts = answer.scores.map((score, column) => {
    const estimate = answer.estimates ? answer.estimates[column] : null;
    const best = answer.best.includes(column) ? " best" : "";
    if (score !== null) {
      const kind = score > 0 ? "win" : score < 0 ? "loss" : "draw";
      const text = score > 0 ? `+${score}` : score < 0 ? `\u2212${-score}` : "0";
      return element("div", `score ${kind}${best}`, text, { column });
    }
    if (estimate !== null) {
      return element("div", `score estimate${best}`, `~${Math.round(estimate)}`, { column });
    }
    return element("div", "score", undefined, { column });
  });
  $("scores").replaceChildren(...parts);
  const note = $("analysis-note");
  note.textContent = `${NAMES[answer.to_move]} to move: ${answer.note} (${answer.seconds.toFixed(2)} s).`;
  note.className = answer.proven ? "proven" : "unproven";
  showNetwork();
}

function percent(p) {
  if (p === null) return "";
  return p > 0 && p < 0.005 ? "<1%" : `${Math.round(p * 100)}%`;
}

function signedValue(value) {
  // A network's value, -1 lost to 1 won, with its sign: "+0.42", "−0.13"
  return `${value < 0 ? "−" : "+"}${Math.abs(value).toFixed(2)}`;
}

function networkVerdict(top) {
  // Whether the solver says the network's top move gives away value: "worse", "best" or null
  // (no exact scores to tell by).
  const answer = view.scores;
  if (!answer || top === undefined) return null;
  if (answer.proven) return answer.best.includes(top) ? "best" : "worse";
  const score = answer.scores[top];  // unproven: only proven wins and losses are exact
  const bestScore = answer.best.length ? answer.scores[answer.best[0]] : null;
  if (score !== null && score < 0 && !answer.best.includes(top) && (bestScore === null || bestScore > score)) {
    return "worse";
  }
  return null;
}

function showNetwork() {
  // The network's probability under each column, its top move framed (red when worse).
  const net = view.network;
  const note = $("network-note");
  if (!net || !net.probabilities) { $("probs").replaceChildren(); note.hidden = true; return; }
  const top = net.top[0];
  const verdict = networkVerdict(top);
  const parts = net.probabilities.map((p, column) => {
    const classes = ["prob", column === top ? "top" : "", column === top && verdict === "worse" ? "worse" : ""];
    const cell = element("div", classes.join(" ").trim(), percent(p), { column });
    cell.style.setProperty("--p", String(p || 0));
    return cell;
  });
  $("probs").style.gridTemplateColumns = `repeat(${net.probabilities.length}, var(--cell))`;
  $("probs").replaceChildren(...parts);
  const best = view.scores ? view.scores.best.map((c) => c + 1).join(" or ") : "";
  const judged = verdict === "worse" ? `: the solver prefers ${best}, so this move gives away value`
    : verdict === "best" ? ": the solver agrees" : "";
  const valued = typeof net.value === "number"
    ? ` Its value for the player to move: ${signedValue(net.value)} (−1 lost, +1 won).` : "";
  note.textContent = `${net.network} plays column ${top + 1} (${percent(net.probabilities[top])})${judged}.${valued}`;
  note.className = verdict === "worse" ? "worse" : "";
  note.hidden = false;
}

async function networkView(generation) {
  // The opponent network's view of the position (play mode), shown as soon as it comes.
  view.network = null;
  const spec = game.opponent;
  if (game.mode !== "play" || !spec || game.networkless.has(spec)) return;
  try {
    const answer = await api("/api/network", { ...position(), opponent: spec });
    if (!answer.network) { game.networkless.add(spec); return; }
    if (generation === game.generation) { view.network = answer; showNetwork(); }
  } catch (error) {
    if (generation === game.generation) {
      const note = $("network-note");
      Object.assign(note, { textContent: `${spec}: ${error.message}`, className: "error", hidden: false });
    }
  }
}

function clearAnalysis() {
  Object.assign(view, { scores: null, network: null });
  $("scores").replaceChildren();
  $("probs").replaceChildren();
  $("network-note").hidden = true;
}

// One analysis in flight per page: the server searches one request at a time and refuses requests
// beyond a few waiting, so analyses of positions already left must not crowd out the next move.
// A position shown meanwhile is analysed when the one in flight has answered (the latest only).
const analysis = { running: false, again: false };

async function analyse(generation) {
  clearAnalysis();
  const note = $("analysis-note");
  if (!$("analyse-on").checked || !game.state) { note.textContent = "—"; note.className = ""; return; }
  if (game.state.terminal) { note.textContent = "The game is over."; note.className = ""; return; }
  if (game.mode === "play" && game.state.to_move !== game.human) {  // the opponent's search comes first
    note.textContent = "Waiting for the opponent's move…"; note.className = ""; return;
  }
  note.textContent = "Analysing…";
  note.className = "";
  if (analysis.running) { analysis.again = true; return; }
  analysis.running = true;
  try {
    await networkView(generation);  // one forward pass: before the solver's longer search
    const budget = Number($("budget").value) || 1;
    const answer = await api("/api/analyse", { ...position(), time_budget: budget });
    if (generation === game.generation) showScores(answer);
  } catch (error) {
    if (generation === game.generation) { note.textContent = error.message; note.className = "error"; }
  } finally {
    analysis.running = false;
    if (analysis.again) { analysis.again = false; analyse(game.generation); }
  }
}

function readSize() {
  const value = (id) => Number.parseInt($(id).value, 10);
  return { rows: value("rows"), columns: value("columns"), inarow: value("inarow") };
}

async function newGame() {
  game.generation++;  // answers for the previous game are dropped
  setStatus("Starting a new game…");
  clearAnalysis();  // nor is the previous game's analysis shown meanwhile
  $("analysis-note").textContent = "—";
  $("analysis-note").className = "";
  const size = readSize();
  if (![size.rows, size.columns, size.inarow].every(Number.isInteger)) {
    setStatus("rows, columns and in-a-row must be whole numbers", true);
    return;
  }
  try {  // ask the server whether it takes this board before starting
    await api("/api/state", { ...size, board: new Array(Math.max(0, size.rows * size.columns)).fill(0) });
  } catch (error) {
    setStatus(error.message, true);
    return;
  }
  Object.assign(game, size, { mode: "play", moves: [], state: null, busy: false });
  game.human = Number($("side").value);
  game.opponent = $("opponent").value.trim() || game.defaultOpponent;
  await refresh();
}

async function undo() {
  // Take back the opponent's reply and your move: it is your turn again. It starts from the
  // position last asked for, so a move still in flight (a click the server has not answered yet,
  // the opponent's search) is the one taken back, not the pair before it.
  const moves = game.target.slice();
  if (game.mode !== "play" || !moves.length) return;
  do { moves.pop(); } while (moves.length && moves.length % 2 !== game.human - 1);
  await refresh(moves);
}

async function clickColumn(event) {
  const target = event.target && event.target.closest("[data-column]");
  if (!target || game.mode !== "play" || game.busy || !game.state) return;  // one move at a time
  const column = Number(target.dataset.column);
  if (game.state.terminal || game.state.to_move !== game.human || !game.state.legal.includes(column)) return;
  await refresh([...game.moves, column]);  // game.busy until the server has answered
}

// -- replay -----------------------------------------------------------------------------------
function currentSaved() { return game.saved[Number($("game-select").value)] || null; }

function parseGames(text) {
  const games = [];
  text.split(/\r?\n/).forEach((line, index) => {
    if (!line.trim()) return;
    let record;
    try { record = JSON.parse(line); } catch { throw new Error(`line ${index + 1} is not JSON`); }
    const ok = record && Array.isArray(record.moves) && [record.rows, record.columns, record.inarow]
      .every(Number.isInteger) && record.moves.every((c) => Number.isInteger(c) && c >= 0 && c < record.columns);
    if (!ok) throw new Error(`line ${index + 1} is not a saved game (rows, columns, inarow, moves)`);
    const height = new Array(record.columns).fill(0);
    if (record.moves.some((c) => ++height[c] > record.rows)) {
      throw new Error(`line ${index + 1}: a move goes into a full column`);
    }
    games.push(record);
  });
  if (!games.length) throw new Error("no games in the file");
  return games;
}

async function openGames(file) {
  try {
    game.saved = parseGames(await file.text());
  } catch (error) {
    setStatus(`${file.name}: ${error.message}`, true);
    return;
  }
  const winner = (g) => (g.winner === 1 ? "red wins" : g.winner === 2 ? "yellow wins" : "draw");
  $("game-select").replaceChildren(...game.saved.map((g, i) => new Option(
    `#${g.game ?? i + 1}: ${(g.players || ["?", "?"]).join(" vs ")} — ${winner(g)}`, String(i))));
  await showSaved(0);
}

async function showSaved(ply) {
  const saved = currentSaved();
  if (!saved) return;
  ply = Math.max(0, Math.min(saved.moves.length, ply));
  Object.assign(game, { mode: "replay", rows: saved.rows, columns: saved.columns, inarow: saved.inarow });
  const moves = saved.moves.slice(0, ply);
  $("ply").max = saved.moves.length;
  $("ply").value = ply;
  const players = saved.players || ["?", "?"];
  const opening = saved.opening_plies ? `; first ${saved.opening_plies} plies: opening` : "";
  $("game-info").textContent = `red: ${players[0]} · yellow: ${players[1]}` +
    `${saved.seed !== undefined ? ` · seed ${saved.seed}` : ""}${opening}`;
  await refresh(moves);
}

// -- the opponent ------------------------------------------------------------------------------
const GROUPS = { network: "Networks", policy: "Search and other policies", agent: "Agents" };

function describeChoice(choice) {
  // One line on the chosen opponent: what it is and the parameters a spec may give it.
  if (!choice) return "Any policy spec: name:key=value,… (e.g. minimax:depth=3, mcts:net=ppo,simulations=200), ~x adds noise.";
  const what = choice.kind === "network" ? "a network: its move probabilities are shown under the scores"
    : choice.kind === "agent" ? "an agent" : "a policy";
  const params = (choice.parameters || []).map((p) => {
    const parts = [];
    if (p.required) parts.push("required");
    else if (p.default !== null && p.default !== undefined) parts.push(String(p.default));
    if (p.max !== undefined) parts.push(`\u2264 ${p.max}`);
    return parts.length ? `${p.name} (${parts.join(", ")})` : p.name;
  });
  const example = (choice.parameters || []).find((p) => !p.required && p.default !== null && p.default !== undefined);
  const joiner = choice.spec.includes(":") ? "," : ":";
  const tail = (params.length ? `; parameters: ${params.join(", ")}` : "") +
    (example ? `, e.g. ${choice.spec}${joiner}${example.name}=${example.default}` : "");
  return `${choice.spec}: ${what}${tail}.`;
}

function showOpponentChoice() {
  // The list follows the spec field: its entry when the spec is one, "other" otherwise.
  const spec = $("opponent").value.trim();
  const choice = game.choices.find((c) => c.spec === spec);
  $("opponent-choice").value = choice ? spec : "";
  $("opponent-help").textContent = describeChoice(choice);
}

function fillOpponents(choices) {
  game.choices = choices;
  const groups = Object.entries(GROUPS).map(([kind, label]) => {
    const group = document.createElement("optgroup");
    group.label = label;
    group.append(...choices.filter((c) => c.kind === kind).map((c) => new Option(c.spec, c.spec)));
    return group;
  }).filter((group) => group.children.length);
  $("opponent-choice").replaceChildren(...groups, new Option("other (typed)", ""));
  $("opponents").replaceChildren(...choices.map((c) => new Option("", c.spec)));
  showOpponentChoice();
}

function changeOpponent() {  // a new opponent takes over the game at once
  game.opponent = $("opponent").value.trim() || game.defaultOpponent;
  showOpponentChoice();
  if (game.mode !== "play" || game.busy || !game.state) return;
  // On your turn the position stays as it is (a click right after the change is not lost to a
  // refresh): only the analysis follows the new opponent. On its turn, it moves.
  if (game.state.terminal || game.state.to_move === game.human) analyse(game.generation);
  else refresh();
}

function setMode(mode) {
  $("tab-play").classList.toggle("active", mode === "play");
  $("tab-replay").classList.toggle("active", mode === "replay");
  $("play-controls").hidden = mode !== "play";
  $("replay-controls").hidden = mode !== "replay";
  if (mode === "play") newGame();
  else if (currentSaved()) showSaved(0);
  else { game.mode = "replay"; setStatus("Open a .jsonl file of saved games (connectx evaluate --save-games)."); }
}

async function start() {
  try {
    const info = await api("/api/policies");
    game.defaultOpponent = info.default;
    $("opponent").value = info.default;
    fillOpponents(info.choices || []);
    $("budget").value = info.analysis_budget;
  } catch (error) {
    setStatus(error.message, true);
  }
  $("board").addEventListener("click", clickColumn);
  window.addEventListener("resize", () => fitCells());
  $("new-game").addEventListener("click", newGame);
  $("undo").addEventListener("click", undo);
  $("opponent").addEventListener("change", changeOpponent);
  $("opponent").addEventListener("input", showOpponentChoice);
  $("opponent-choice").addEventListener("change", () => {
    const spec = $("opponent-choice").value;
    if (!spec) { $("opponent").select(); $("opponent-help").textContent = describeChoice(null); return; }
    $("opponent").value = spec;
    changeOpponent();
  });
  $("tab-play").addEventListener("click", () => setMode("play"));
  $("tab-replay").addEventListener("click", () => setMode("replay"));
  $("analyse-on").addEventListener("change", () => analyse(game.generation));
  $("games-file").addEventListener("change", (event) => event.target.files[0] && openGames(event.target.files[0]));
  $("game-select").addEventListener("change", () => showSaved(0));
  $("first").addEventListener("click", () => showSaved(0));
  $("prev").addEventListener("click", () => showSaved(game.moves.length - 1));
  $("next").addEventListener("click", () => showSaved(game.moves.length + 1));
  $("last").addEventListener("click", () => showSaved(Infinity));
  $("ply").addEventListener("input", (event) => showSaved(Number(event.target.value)));
  document.addEventListener("keydown", (event) => {
    if (event.target.tagName === "INPUT" || event.target.tagName === "SELECT") return;
    if (game.mode === "replay" && event.key === "ArrowLeft") showSaved(game.moves.length - 1);
    if (game.mode === "replay" && event.key === "ArrowRight") showSaved(game.moves.length + 1);
    const digit = Number.parseInt(event.key, 10);  // keys 1-9 play a column
    if (game.mode === "play" && digit >= 1 && digit <= game.columns) {
      clickColumn({ target: document.querySelector(`#board .head[data-column="${digit - 1}"]`) });
    }
  });
  await newGame();
}

start();
