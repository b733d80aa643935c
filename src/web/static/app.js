// The Market Intelligence dashboard: one ES module, no build step, no framework.
// Market data comes from /app/data/... (the same operations as /api/v1, on the dashboard's
// own per-address budget); key management and theses call /api/v1 with the signed-in user's
// JWT (from the embedded identity provider's /auth/token), under the API's own rules.
// Every value from the server is written with textContent, never as HTML.

const CONFIG = JSON.parse(document.getElementById('config').textContent);
const main = document.getElementById('main');

/** The signal levels, strongest buy first, from the engine (src/web/page.ts, PageConfig). */
const LEVELS = CONFIG.signalLevels;
/** 'strong_buy' → 'Strong buy'. */
const LEVEL_LABEL = Object.fromEntries(LEVELS.map((l) => [l, (l[0].toUpperCase() + l.slice(1)).replace('_', ' ')]));
/** Chart colours per level (band and markers). */
const LEVEL_COLOR = { strong_buy: '#0b6b2f', buy: '#5fbf83', neutral: '#b7bec9', sell: '#e5837d', strong_sell: '#8a1610' };
/** strong_buy 2 … strong_sell −2: the middle level is 0. */
const LEVEL_RANK = Object.fromEntries(LEVELS.map((l, i) => [l, (LEVELS.length - 1) / 2 - i]));
const THESIS_METRICS = CONFIG.thesisMetrics;
const OPERATORS = { lt: '<', lte: '≤', gt: '>', gte: '≥', eq: '=', neq: '≠' };
/** What set a signal's level (`level_rule.reason`, engine LEVEL_REASONS), as the history table names it. */
const LEVEL_REASON_LABELS = { band: 'Band', hysteresis: 'Hysteresis', confirmation: 'Confirmation', volatility_gate: 'Volatility gate' };

// ---------------------------------------------------------------- DOM and formatting helpers

/** Creates an element: `attrs` may hold `class`, `text`, `on<event>` handlers, `dataset`, and attributes. */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = String(v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const num = (v, digits = 2) =>
  v === null || v === undefined ? '—' : Number(v).toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 });
/** A USD price: whole dollars from $1,000, cents from $1, below that 4 significant digits ($0.2329, $0.00001234): never $0.0000 for a price above zero. */
function price(v) {
  if (v === null || v === undefined) return '—';
  const n = Number(v);
  if (n !== 0 && Math.abs(n) < 1) return '$' + n.toLocaleString('en-US', { maximumSignificantDigits: 4 });
  const d = Math.abs(n) >= 1000 ? 0 : 2;
  return '$' + n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
}
/**
 * A funding rate (fraction per 8 h) in percent: 4 decimals, or 2 significant digits when 4
 * decimals would round a rate that is not zero to 0.0000 (BTC's daily mean was -1.3e-7 on
 * 2025-04-22: -0.000013 %, not -0.0000 %).
 */
function fundingPct(v) {
  const p = v * 100;
  return p !== 0 && Math.abs(p) < 0.00005 ? p.toPrecision(2) : p.toFixed(4);
}
function pct(v) {
  if (v === null || v === undefined) return h('span', { class: 'muted', text: 'no data' });
  const s = (v > 0 ? '+' : '') + Number(v).toFixed(2) + '%';
  return h('span', { class: v > 0 ? 'up' : v < 0 ? 'down' : '' }, s);
}
/**
 * A table in a region that scrolls sideways and takes keyboard focus (`.table-wrap`): the frame
 * of every table on the dashboard. `attrs` go on the table, but for two:
 * - `numeric(i)`: column i holds numbers (its header right-aligned, like its cells);
 * - `labelledBy`: the id of the sentence that names the region and the table (default: the
 *   region is named "Scrollable table" and the table has no name of its own).
 * `heads`: a column's header text, a `th` (kept as it is) or any other node (put in a `th`).
 * `body`: a tbody element (kept as it is), or the row or rows of a new one.
 */
function scrollTable({ numeric = () => false, labelledBy, ...attrs }, heads, body) {
  const named = labelledBy ? { 'aria-labelledby': labelledBy } : null;
  const th = (x, i) => (x instanceof Node && x.tagName === 'TH' ? x : h('th', { scope: 'col', class: numeric(i) ? 'num' : '' }, x));
  return h(
    'div',
    { class: 'table-wrap', tabindex: 0, role: 'region', ...(named ?? { 'aria-label': 'Scrollable table' }) },
    h(
      'table',
      { ...attrs, ...named },
      h('thead', {}, h('tr', {}, heads.map(th))),
      body instanceof Node && body.tagName === 'TBODY' ? body : h('tbody', {}, body),
    ),
  );
}
const level = (l) => (l ? h('span', { class: `level ${l}`, text: LEVEL_LABEL[l] ?? l }) : h('span', { class: 'muted', text: 'none' }));
const regimeBadge = (r) => h('span', { class: `level ${r}`, text: r });
/** Whole days between two YYYY-MM-DD days. */
const daysBetween = (a, b) => Math.round((Date.parse(b) - Date.parse(a)) / 86_400_000);
/**
 * "as of D". With `verdict` (an answer's `stale` / `stale_reason`, the API's own judgement
 * against each series' cadence: docs/live-data.md) it is marked stale, the reason opening
 * from it (`<details>`);
 * without one (a component inside an answer), when older than the service's as-of day.
 */
function freshness(asOf, serviceAsOf, verdict) {
  if (!asOf) return h('span', { class: 'stale', text: 'missing' });
  if (verdict) {
    if (!verdict.stale) return h('span', { text: asOf });
    // The reason names every late series with its last day and can run to several lines: it
    // opens from the marked day (click, tap or keyboard) instead of filling the table's row.
    return h(
      'details',
      { class: 'stale-why' },
      h('summary', {}, h('span', { class: 'stale', text: `${asOf} (stale)` })),
      // A span (shown as a block), not a <p>: the mark also sits inside sentences (the regime's <p>).
      h('span', { class: 'small stale-reason', text: verdict.stale_reason ?? 'no reason given' }),
    );
  }
  const lag = serviceAsOf ? daysBetween(asOf, serviceAsOf) : 0;
  return lag > 0 ? h('span', { class: 'stale', text: `${asOf} (stale: ${lag} d old)` }) : h('span', { text: asOf });
}
function card(title, ...children) {
  return h('section', { class: 'card', 'aria-labelledby': idFor(title) }, h('h2', { id: idFor(title), text: title }), ...children);
}
const idFor = (title) => 'h-' + title.toLowerCase().replace(/[^a-z0-9]+/g, '-');
function say(el, text, kind = '') {
  el.textContent = text;
  el.className = `msg ${kind}`;
}
/**
 * `say`, then moves the keyboard focus to the message: after an action re-renders the list
 * that held the focused button, the next Tab goes on from here, not from the page's top.
 */
function sayAndFocus(el, text, kind = '') {
  say(el, text, kind);
  el.tabIndex = -1;
  el.focus();
}
/**
 * Runs `work` with `button` disabled (one request per click), then enables it again. A focused
 * button that is disabled drops the keyboard focus to the page's <body>, so the next Tab would
 * start again from the top of the page: when the focus was on the button and is now nowhere,
 * it goes back to the button (README, "Web dashboard": usable by keyboard).
 */
async function whileDisabled(button, work) {
  const hadFocus = document.activeElement === button;
  button.disabled = true;
  try {
    return await work();
  } finally {
    button.disabled = false;
    const lost = !document.activeElement || document.activeElement === document.body;
    if (hadFocus && lost && button.isConnected) button.focus();
  }
}
function setTitle(t) {
  document.title = `${t} - Market Intelligence`;
}

// ---------------------------------------------------------------- data, auth and API calls

/**
 * How long a page waits for one of its data answers before saying so, instead of showing
 * "Loading..." for as long as the browser keeps the request open (minutes).
 */
const DATA_TIMEOUT_MS = 30_000;

/**
 * GET /app/data/<path>: `{data, meta}`; throws an Error with the envelope's message, or one in
 * words when there is none: no answer within DATA_TIMEOUT_MS, no connection, or an error page
 * that is not the API's JSON (a proxy's 502/503).
 */
async function data(path, headers = {}) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), DATA_TIMEOUT_MS);
  let res;
  let body;
  try {
    res = await fetch(`/app/data${path}`, { headers, signal: ctl.signal });
    body = await res.json().catch(() => null);
  } catch {
    const e = new Error(
      ctl.signal.aborted
        ? `The service did not answer within ${DATA_TIMEOUT_MS / 1000} seconds: try again in a moment.`
        : 'The service could not be reached (network error): check your connection and try again.',
    );
    e.status = 0;
    throw e;
  } finally {
    clearTimeout(timer);
  }
  if (!res.ok || !body || body.status !== 'ok') {
    const fallback = res.status >= 500 ? `The service is unavailable (HTTP ${res.status}): try again in a moment.` : `HTTP ${res.status}`;
    const e = new Error(body?.error?.message ?? fallback);
    e.status = res.status;
    e.code = body?.error?.code;
    throw e;
  }
  return body;
}

let jwtCache = null;
/**
 * The signed-in user's JWT (from the session cookie), refreshed a minute before it expires;
 * null when signed out. With `throwOnNetworkError`, a session check that cannot reach the
 * service throws instead of reading as signed out.
 */
async function jwt({ throwOnNetworkError = false, signal = undefined } = {}) {
  if (jwtCache && jwtCache.expiresAt - Date.now() > 60_000) return jwtCache.token;
  if (CONFIG.signIn !== 'embedded') return null;
  // The session first (200 with null when signed out), so a signed-out page makes no failing request.
  const session = await fetch('/auth/get-session', { credentials: 'same-origin', signal })
    .then((r) => (r.ok ? r.json() : null))
    .catch((e) => {
      if (throwOnNetworkError) throw e;
      return null;
    });
  if (!session) return (jwtCache = null);
  const res = await fetch('/auth/token', { credentials: 'same-origin', signal }).catch((e) => {
    if (signal?.aborted) throw e;
    return null;
  });
  if (!res || !res.ok) return (jwtCache = null);
  const body = await res.json().catch((e) => {
    if (signal?.aborted) throw e;
    return null;
  });
  if (!body || typeof body.token !== 'string') return (jwtCache = null);
  const part = body.token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
  const claims = JSON.parse(atob(part + '='.repeat((4 - (part.length % 4)) % 4)));
  // Its end on the browser's clock: received now, valid for its lifetime (exp - iat, both by the
  // server's clock). The browser's date may be off: compared with `exp` itself, a clock 15
  // minutes behind kept using an expired JWT (401: "session ended" while the session was fine),
  // one ahead fetched a new JWT for every call.
  const lifetimeMs = Number.isFinite(claims.exp - claims.iat) ? (claims.exp - claims.iat) * 1000 : 0;
  jwtCache = { token: body.token, expiresAt: Date.now() + lifetimeMs, email: claims.email ?? claims.sub };
  return body.token;
}

/** What a call that could not reach the service answers (fetch rejected: offline, the server down). */
const NETWORK_ERROR = 'The service could not be reached (network error), so nothing was changed: check your connection and try again.';

/**
 * How long an account action (api) waits for the service's answer, the session check included,
 * before it gives up and says so: a stalled request would otherwise keep its button disabled
 * for as long as the browser keeps the request open.
 */
const API_TIMEOUT_MS = 30_000;
/** Said when a change (POST, DELETE) was sent but no answer came: it may have been applied or not. */
const NO_ANSWER_CHANGE = `No answer from the service within ${API_TIMEOUT_MS / 1000} seconds: the request may or may not have been applied. Refresh the list to see whether it was.`;

/**
 * `fetch` that gives up (rejects with an AbortError) when no answer has come within
 * API_TIMEOUT_MS: the identity provider's sign-in, sign-up and sign-out, so a stalled request
 * does not leave "Working..." or a dead button for as long as the browser keeps it open.
 */
function fetchWithin(url, init) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), API_TIMEOUT_MS);
  return fetch(url, { ...init, signal: ctl.signal }).finally(() => clearTimeout(timer));
}
/** Whether `e` is fetchWithin giving up (no answer in time) rather than a failed connection. */
const noAnswer = (e) => e?.name === 'AbortError';

/**
 * A call to /api/v1 with the user's JWT: `{ok, status, body, tier}`. Never throws: when the
 * service cannot be reached, `{ok: false, status: 0}` with NETWORK_ERROR as the message, so
 * every caller shows it and re-enables its form; when no answer comes within API_TIMEOUT_MS,
 * the same with a message that says so (for a change already sent: NO_ANSWER_CHANGE, since
 * the service may have applied it).
 */
async function api(method, path, body) {
  const result = (message) => ({ ok: false, status: 0, body: { error: { message } } });
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), API_TIMEOUT_MS);
  let sent = false;
  try {
    const token = await jwt({ throwOnNetworkError: true, signal: ctl.signal });
    if (!token) return sessionEnded();
    sent = true;
    const res = await fetch(`/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: ctl.signal,
    });
    const json = await res.json().catch((e) => {
      if (ctl.signal.aborted) throw e;
      return null;
    });
    // A JWT refused (the session ended or was revoked elsewhere): not signed in any more.
    if (res.status === 401) return sessionEnded();
    return { ok: res.ok, status: res.status, body: json, tier: res.headers.get('x-service-tier') };
  } catch {
    if (!ctl.signal.aborted) return result(NETWORK_ERROR);
    if (sent && method !== 'GET') return result(NO_ANSWER_CHANGE);
    return result(
      `The service did not answer within ${API_TIMEOUT_MS / 1000} seconds${sent ? '' : ', so nothing was sent'}: try again in a moment.`,
    );
  } finally {
    clearTimeout(timer);
  }
}

/** Said on the sign-in form shown after the session ended while the account page was open. */
const SESSION_ENDED = 'Your session has ended (signed out, or expired): sign in again.';
let signInNotice = null;

/**
 * The session ended while the account page was open: forget the JWT and show the sign-in
 * form with a notice, instead of "Signed in as" over forms that can no longer work. Returns
 * the 401 result for the caller (whose form is gone by then).
 */
function sessionEnded() {
  jwtCache = null;
  const path = location.pathname.replace(/\/+$/, '');
  if (path === '/account' || path === '/signin') {
    signInNotice = SESSION_ENDED;
    void accountPage({ focus: true });
  }
  return { ok: false, status: 401, body: { error: { message: SESSION_ENDED } } };
}
const errorOf = (r) => r.body?.error?.message ?? r.body?.message ?? `Failed (HTTP ${r.status})`;

/** A modal confirmation (a <dialog>): resolves true when confirmed. */
function confirmDialog(text, okLabel) {
  return new Promise((resolve) => {
    const ok = h('button', { type: 'button', class: 'danger', text: okLabel });
    const cancel = h('button', { type: 'button', class: 'secondary', text: 'Cancel' });
    const d = h(
      'dialog',
      { 'aria-labelledby': 'confirm-title' },
      h('h2', { id: 'confirm-title', text: 'Please confirm' }),
      h('p', { text }),
      h('div', { class: 'row' }, cancel, ok),
    );
    const done = (v) => {
      d.close();
      d.remove();
      resolve(v);
    };
    ok.addEventListener('click', () => done(true));
    cancel.addEventListener('click', () => done(false));
    d.addEventListener('cancel', () => done(false));
    document.body.append(d);
    d.showModal();
    cancel.focus();
  });
}

async function copyText(text, status) {
  try {
    await navigator.clipboard.writeText(text);
    say(status, 'Copied to the clipboard.', 'ok');
  } catch {
    say(status, 'Copy failed: select the text and copy it.', 'error');
  }
}

// ---------------------------------------------------------------- overview

const COLUMNS = [
  { key: 'name', label: 'Asset', get: (s) => s.name },
  { key: 'signal', label: 'Signal', get: (s) => LEVEL_RANK[s.signal] },
  { key: 'score', label: 'Score', num: true, get: (s) => s.score },
  { key: 'confidence', label: 'Confidence', num: true, narrow: false, get: (s) => s.confidence },
  { key: 'price_usd', label: 'Price', num: true, get: (s) => s.price_usd },
  { key: 'change_24h_pct', label: '24 h', num: true, narrow: false, get: (s) => s.change_24h_pct },
  { key: 'change_7d_pct', label: '7 d', num: true, get: (s) => s.change_7d_pct },
  { key: 'since', label: 'Since', narrow: false, get: (s) => s.since },
  { key: 'as_of', label: 'Data as of', narrow: false, get: (s) => s.as_of },
];

function conditionRows(c, asOf) {
  const row = (name, value, state, at) =>
    h(
      'div',
      { class: 'card' },
      h('h3', { text: name }),
      value,
      state ? h('p', { class: 'small' }, 'State: ', h('strong', { text: state })) : null,
      h('p', { class: 'small muted' }, 'As of ', freshness(at, asOf)),
    );
  const missing = (name) => h('div', { class: 'card' }, h('h3', { text: name }), h('p', { class: 'stale', text: 'No data: not used' }));
  return [
    c.rsi ? row('RSI-14', h('p', { text: num(c.rsi.value, 1) }), c.rsi.state, c.rsi.as_of) : missing('RSI-14'),
    c.fear_greed
      ? row('Fear & Greed', h('p', { text: `${c.fear_greed.value} (${c.fear_greed.classification})` }), null, c.fear_greed.as_of)
      : missing('Fear & Greed'),
    c.momentum
      ? row(
          'Momentum',
          h('p', {}, '30 d return ', pct(c.momentum.return_30d_pct), h('br'), 'vs 200-day SMA ', pct(c.momentum.price_vs_sma_200_pct)),
          c.momentum.state,
          c.momentum.as_of,
        )
      : missing('Momentum'),
    c.funding_rate
      ? row(
          'Funding rate',
          h('p', {
            text: `${fundingPct(c.funding_rate.value)}% per 8 h (${num(c.funding_rate.annualized_pct, Math.abs(c.funding_rate.annualized_pct) < 1 ? 2 : 1)}% a year)`,
          }),
          c.funding_rate.state,
          c.funding_rate.as_of,
        )
      : missing('Funding rate'),
  ];
}

async function overview() {
  setTitle('Overview');
  const [regime, signals] = await Promise.all([data('/regime'), data('/signals')]);
  const r = regime.data;
  const asOf = regime.meta.as_of;
  main.replaceChildren(
    h('h1', { text: 'Overview' }),
    card(
      'BTC market regime',
      h(
        'p',
        {},
        regimeBadge(r.regime),
        ` score ${num(r.score, 3)}, confidence ${num(r.confidence, 2)}, since ${r.since} (as of `,
        freshness(r.as_of, asOf, r),
        ')',
      ),
      h('div', { class: 'grid' }, conditionRows(r.conditions, asOf)),
    ),
    signalsTable(signals.data, asOf),
  );
}

function signalsTable(d, asOf) {
  let sort = { key: 'score', dir: -1 };
  const tbody = h('tbody');
  const heads = COLUMNS.map((c) => {
    const th = h('th', { scope: 'col', class: [c.num ? 'num' : '', c.narrow === false ? 'hide-narrow' : ''].join(' ') });
    const b = h('button', { type: 'button', text: c.label, onclick: () => sortBy(c.key) });
    th.append(b);
    return th;
  });
  function sortBy(key) {
    sort = sort.key === key ? { key, dir: -sort.dir } : { key, dir: key === 'name' || key === 'since' ? 1 : -1 };
    render();
  }
  function render() {
    const col = COLUMNS.find((c) => c.key === sort.key);
    const rows = [...d.signals].sort((a, b) => {
      const x = col.get(a);
      const y = col.get(b);
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * sort.dir;
    });
    COLUMNS.forEach((c, i) => {
      if (c.key === sort.key) heads[i].setAttribute('aria-sort', sort.dir > 0 ? 'ascending' : 'descending');
      else heads[i].removeAttribute('aria-sort');
    });
    tbody.replaceChildren(
      ...rows.map((s) => {
        const href = `/asset/${encodeURIComponent(s.asset)}`;
        const tr = h(
          'tr',
          {
            class: 'link-row',
            dataset: { asset: s.asset },
            // A click on the ticker's link or on the stale mark (which opens its reason) is theirs.
            onclick: (e) => !e.target.closest('a, details') && (location.href = href),
          },
          h(
            'td',
            {},
            h('a', { href }, s.symbol),
            h('span', { class: 'muted hide-narrow' }, ' ', s.name),
            // On a phone the "data as of" column is hidden: the stale mark moves here, opening
            // to its reason like the column's (click, tap or keyboard; a title is out of reach
            // of both). The reason opens across the table (app.css), not in this narrow cell.
            // (Inside a wrapper: a cell holding .stale itself wraps with a wide minimum width.)
            s.stale
              ? h(
                  'span',
                  { class: 'show-narrow' },
                  h(
                    'details',
                    { class: 'stale-why' },
                    h(
                      'summary',
                      {},
                      h(
                        'span',
                        { class: 'stale' },
                        h('span', { 'aria-hidden': 'true', text: '⚠' }),
                        h('span', { class: 'sr-only', text: `stale, data of ${s.as_of}` }),
                      ),
                    ),
                    h('span', { class: 'small stale-reason', text: s.stale_reason ?? 'no reason given' }),
                  ),
                )
              : null,
          ),
          h('td', {}, level(s.signal)),
          h('td', { class: 'num', text: num(s.score, 3) }),
          h('td', { class: 'num hide-narrow', text: num(s.confidence, 2) }),
          h('td', { class: 'num', text: price(s.price_usd) }),
          h('td', { class: 'num hide-narrow' }, pct(s.change_24h_pct)),
          h('td', { class: 'num' }, pct(s.change_7d_pct)),
          h('td', { class: 'hide-narrow', text: s.since }),
          h('td', { class: 'hide-narrow' }, freshness(s.as_of, asOf, s)),
        );
        return tr;
      }),
    );
  }
  render();
  return card(
    'Signals',
    h(
      'p',
      { class: 'small muted' },
      `Computed as of ${asOf}. Sort by a column with its header button; open an asset with its ticker. How the signals did since 2020: `,
      h('a', { href: '/track-record', text: 'track record' }),
      '.',
    ),
    scrollTable({ id: 'signals' }, heads, tbody),
    d.unavailable.length
      ? h(
          'div',
          {},
          h('h3', { text: 'Unavailable' }),
          h(
            'ul',
            {},
            d.unavailable.map((u) => h('li', { text: `${u.asset}: ${u.reason}` })),
          ),
        )
      : null,
  );
}

// ---------------------------------------------------------------- asset page

let chartsLib = null;
/** Loads lightweight-charts (served from node_modules by this service) once. */
function loadCharts() {
  chartsLib ??= new Promise((resolve, reject) => {
    const s = h('script', { src: '/app/vendor/lightweight-charts.standalone.production.js' });
    s.addEventListener('load', () => resolve(window.LightweightCharts));
    s.addEventListener('error', () => reject(new Error('The chart library could not be loaded')));
    document.head.append(s);
  });
  return chartsLib;
}

/**
 * The days missing between consecutive candles (`candles` oldest first, `date` YYYY-MM-DD):
 * `[{from, to, days}]`, one entry per run of missing calendar days. The API serves the days its
 * source has and never fills the others (GET /prices/{asset}).
 */
function missingDays(candles) {
  const out = [];
  for (let i = 1; i < candles.length; i++) {
    const gap = daysBetween(candles[i - 1].date, candles[i].date) - 1;
    if (gap > 0) out.push({ from: addDay(candles[i - 1].date, 1), to: addDay(candles[i].date, -1), days: gap });
  }
  return out;
}
/** `day` (YYYY-MM-DD) moved by `n` UTC days. */
const addDay = (day, n) => new Date(Date.parse(day) + n * 86_400_000).toISOString().slice(0, 10);

/**
 * The candlestick series of `candles` (oldest first) with a whitespace point (time only) for
 * each day of `gaps` (missingDays of the same candles), in time order, in one pass.
 */
function candlePoints(candles, gaps) {
  const out = [];
  let g = 0;
  for (const c of candles) {
    // Every gap lies between two candles: its days go before the first candle after it.
    for (; g < gaps.length && gaps[g].to < c.date; g++) for (let k = 0; k < gaps[g].days; k++) out.push({ time: addDay(gaps[g].from, k) });
    out.push({ time: c.date, open: c.open, high: c.high, low: c.low, close: c.close });
  }
  return out;
}

/** Draws the price chart of the prices answer `p` into `el`; `gaps`: missingDays(p.candles). */
function drawChart(el, lib, p, gaps) {
  const chart = lib.createChart(el, {
    autoSize: true,
    // The logo injects an inline <style> (refused by the CSP): the attribution is a text link under the chart instead.
    layout: { background: { color: '#ffffff' }, textColor: '#1b2230', attributionLogo: false },
    grid: { vertLines: { color: '#eef0f4' }, horzLines: { color: '#eef0f4' } },
    rightPriceScale: { scaleMargins: { top: 0.08, bottom: 0.12 } },
    timeScale: { borderColor: '#d5dae2' },
  });
  const candles = chart.addSeries(lib.CandlestickSeries, {
    upColor: '#1c7c43',
    downColor: '#b3261e',
    borderVisible: false,
    wickUpColor: '#1c7c43',
    wickDownColor: '#b3261e',
  });
  // A day without a candle is a whitespace point (time only): the library leaves its slot empty
  // instead of closing the time axis over it, so a gap shows as a gap.
  const points = candlePoints(p.candles, gaps);
  candles.setData(points);
  // The signal level in effect each day, as a colour band along the bottom.
  const band = chart.addSeries(lib.HistogramSeries, { priceScaleId: 'band', priceLineVisible: false, lastValueVisible: false });
  chart.priceScale('band').applyOptions({ scaleMargins: { top: 0.93, bottom: 0 }, visible: false });
  let current = p.signal_at_start;
  let next = 0;
  const bandData = [];
  for (const c of p.candles) {
    while (next < p.signal_changes.length && p.signal_changes[next].date <= c.date) current = p.signal_changes[next++].signal;
    if (current) bandData.push({ time: c.date, value: 1, color: LEVEL_COLOR[current] });
  }
  band.setData(bandData);
  const markers = p.signal_changes.map((c) => {
    const up = LEVEL_RANK[c.signal] > (c.previous_signal ? LEVEL_RANK[c.previous_signal] : 0);
    return {
      time: c.date,
      position: up ? 'belowBar' : 'aboveBar',
      color: up ? '#0b6b2f' : '#8a1610',
      shape: up ? 'arrowUp' : 'arrowDown',
      // On a narrow chart the labels of a year's changes pile up: the arrows alone there (the
      // colour band and the history table name the levels).
      text: el.clientWidth < 600 ? '' : LEVEL_LABEL[c.signal],
    };
  });
  const plugin = lib.createSeriesMarkers(candles, markers);
  chart.timeScale().fitContent();
  el.dataset.markers = String(plugin.markers().length);
  el.dataset.candles = String(p.candles.length);
  el.dataset.missingDays = String(points.length - p.candles.length);
  return chart;
}

function factorBars(s) {
  const max = Math.max(0.0001, ...s.factors.map((f) => Math.abs(f.contribution)));
  const sum = s.factors.reduce((a, f) => a + f.contribution, 0);
  return [
    h(
      'ul',
      { class: 'factors', id: 'factors' },
      s.factors.map((f) => {
        const w = (Math.abs(f.contribution) / max) * 50;
        const span = h('span', { class: f.contribution >= 0 ? 'pos' : 'neg' });
        span.style.left = f.contribution >= 0 ? '50%' : `${50 - w}%`;
        span.style.width = `${w}%`;
        return h(
          'li',
          { dataset: { contribution: f.contribution } },
          h('strong', { text: f.name.replace(/_/g, ' ') }),
          h('div', { class: 'bar', role: 'img', 'aria-label': `${f.name} contributes ${num(f.contribution, 4)}` }, span),
          h('span', { class: 'num', text: (f.contribution > 0 ? '+' : '') + num(f.contribution, 4) }),
          h(
            'span',
            { class: 'expl' },
            f.explanation,
            ` (value ${typeof f.value === 'number' ? num(f.value, 4) : f.value}${f.unit ? ' ' + f.unit : ''}, score ${num(f.score, 3)} × weight ${num(f.weight, 3)}; ${f.source}, as of ${f.as_of})`,
          ),
        );
      }),
    ),
    h('p', { id: 'factor-sum' }, 'Sum of contributions: ', h('strong', { text: num(sum, 4) }), ` = score ${num(s.score, 4)}`),
    s.missing_factors?.length
      ? h(
          'div',
          {},
          h('h3', { text: 'Not used (no data)' }),
          h(
            'ul',
            {},
            s.missing_factors.map((m) => h('li', { text: `${m.name}: ${m.reason}` })),
          ),
        )
      : null,
  ];
}

function healthCard(c, asOf, title) {
  return card(
    title,
    h(
      'dl',
      { class: 'kv' },
      h('dt', { text: 'Score (0..100, 50 = normal)' }),
      h('dd', {}, c.score === null ? h('span', { class: 'stale', text: 'no fresh metric' }) : h('strong', { text: num(c.score, 1) })),
      h('dt', { text: 'Status' }),
      h('dd', { text: c.status }),
      h('dt', { text: 'Combined z-score' }),
      h('dd', { text: num(c.z_score, 3) }),
      h('dt', { text: 'Regime / sensitivity' }),
      h('dd', { text: `${c.regime} / ${num(c.sensitivity, 2)}` }),
      h('dt', { text: 'As of' }),
      h('dd', {}, freshness(c.as_of, asOf, c)),
    ),
    // Each table named by its heading and chain: the chains page has six, not six "Scrollable table".
    h('h3', { id: `components-${c.chain}`, text: `Components (z-scores over ${c.window_days} days)` }),
    scrollTable(
      { numeric: (i) => i > 0 && i < 5, labelledBy: `${idFor(title)} components-${c.chain}` },
      ['Metric', 'Value', 'z-score', 'Weight', 'Contribution', 'As of'],
      c.components.length === 0
        ? h(
            'tr',
            {},
            h('td', {
              colspan: 6,
              class: 'muted',
              text: 'None: no metric has current data, so there is no score (see the missing or stale metrics below).',
            }),
          )
        : c.components.map((m) =>
            h(
              'tr',
              {},
              h('td', { text: m.metric }),
              h('td', { class: 'num', text: num(m.value, 2) }),
              h('td', { class: 'num', text: num(m.z_score, 3) }),
              h('td', { class: 'num', text: num(m.weight, 3) }),
              h('td', { class: 'num', text: num(m.contribution, 3) }),
              h('td', {}, freshness(m.as_of, asOf)),
            ),
          ),
    ),
    c.missing_metrics.length
      ? h(
          'div',
          {},
          h('h3', { text: 'Missing or stale (not counted, never zero)' }),
          h(
            'ul',
            {},
            c.missing_metrics.map((m) =>
              h('li', {}, h('span', { class: 'stale', text: m.metric }), ` ${m.reason}${m.last_date ? ` (last ${m.last_date})` : ''}`),
            ),
          ),
        )
      : null,
  );
}

async function historySection(asset, el) {
  const signedIn = await jwt();
  const tiers = 'pro or api';
  if (!signedIn) {
    el.append(
      h(
        'p',
        {},
        `The signal history (each change with its factor snapshot) needs the ${tiers} tier. `,
        h('a', { href: '/account', text: 'Sign in' }),
        ' to see it if your plan has it.',
      ),
    );
    return;
  }
  try {
    const r = await data(`/signal-history/${encodeURIComponent(asset)}?days=365&limit=50`, { authorization: `Bearer ${signedIn}` });
    const rows = r.data.entries;
    el.append(
      h('p', { class: 'small muted', text: `${rows.length} changes in the last 365 days, newest first.` }),
      scrollTable(
        { id: 'history', numeric: (i) => i >= 3 && i <= 5 },
        ['Day', 'Signal', 'Previous', 'Score', 'Confidence', 'Price', 'Why'],
        rows.map((e) =>
          h(
            'tr',
            {},
            h('td', { text: e.changed_at }),
            h('td', {}, level(e.signal)),
            h('td', {}, level(e.previous_signal)),
            h('td', { class: 'num', text: num(e.score, 3) }),
            h('td', { class: 'num', text: num(e.confidence, 2) }),
            h('td', { class: 'num', text: price(e.price_usd) }),
            // The rule that set the level that day (band, hysteresis, confirmation, volatility
            // gate) as a disclosure: its sentence opens by click, tap or keyboard (a title
            // attribute reaches mouse users only). Changes stored without a rule: a dash.
            e.level_rule
              ? h(
                  'td',
                  { class: 'why' },
                  h(
                    'details',
                    {},
                    h('summary', { text: LEVEL_REASON_LABELS[e.level_rule.reason] ?? e.level_rule.reason }),
                    h('p', { class: 'small', text: e.level_rule.explanation }),
                  ),
                )
              : h('td', { text: '—' }),
          ),
        ),
      ),
    );
  } catch (e) {
    el.append(
      h(
        'p',
        { class: 'notice', id: 'history-tier' },
        e.code === 'TIER_REQUIRED' ? `The signal history is for the ${tiers} tier. ` : '',
        e.message,
      ),
    );
  }
}

/** The sentence naming the days the window's candles lack (`gaps`: missingDays; left blank on the chart), or null when none. */
function gapNote(gaps) {
  if (!gaps.length) return null;
  const total = gaps.reduce((a, g) => a + g.days, 0);
  const runs = gaps.map((g) => (g.days === 1 ? g.from : `${g.from} to ${g.to}`)).join(', ');
  return h('p', {
    class: 'small',
    id: 'chart-gaps',
    text: `No data for ${total} ${total === 1 ? 'day' : 'days'} (${runs}): left blank, not filled.`,
  });
}

async function assetPage(asked) {
  const days = Number(new URLSearchParams(location.search).get('days')) || 180;
  const q = encodeURIComponent(asked);
  const [sig, prices, assets] = await Promise.all([
    data(`/signals/${q}?include_factors=true`),
    data(`/prices/${q}?days=${days}`),
    data('/assets'),
  ]);
  const s = sig.data;
  const p = prices.data;
  const gaps = missingDays(p.candles);
  const asOf = sig.meta.as_of;
  setTitle(`${s.name} (${s.symbol})`);
  const info = assets.data.assets.find((a) => a.asset === s.asset);
  const chartEl = h('div', {
    class: 'chart',
    id: 'chart',
    role: 'img',
    'aria-label': `Daily candlestick chart of ${s.name} over ${days} days with ${p.signal_changes.length} signal changes`,
  });
  // The window shown is a link too, marked aria-current (a screen reader says "current page"),
  // drawn bold and without an underline like the plain text it was (app.css .windows).
  const daysNav = h(
    'p',
    { class: 'small windows' },
    'Window: ',
    [30, 90, 180, 365].map((d) => [h('a', { href: `?days=${d}`, text: `${d} d`, 'aria-current': d === days ? 'page' : null }), ' ']),
  );
  const historyEl = h('div');
  main.replaceChildren(
    h('p', { class: 'small' }, h('a', { href: '/', text: '← Overview' })),
    h('h1', {}, `${s.name} (${s.symbol}) `, level(s.signal)),
    card(
      'Signal',
      h(
        'dl',
        { class: 'kv' },
        h('dt', { text: 'Score (-1..1)' }),
        h('dd', { text: num(s.score, 4) }),
        h('dt', { text: 'Confidence (0..1)' }),
        h('dd', { text: num(s.confidence, 2) }),
        h('dt', { text: 'Price' }),
        h('dd', { text: price(s.price_usd) }),
        h('dt', { text: '24 h / 7 d' }),
        h('dd', {}, pct(s.change_24h_pct), ' / ', pct(s.change_7d_pct)),
        h('dt', { text: 'Since' }),
        h('dd', { text: s.since }),
        // Why this level given the score (bands, hysteresis, confirmation, the volatility gate): data.level_rule.
        ...(s.level_rule ? [h('dt', { text: 'Why this level' }), h('dd', { class: 'why-level', text: s.level_rule.explanation })] : []),
        h('dt', { text: 'Data as of' }),
        h('dd', {}, freshness(s.as_of, asOf, s)),
      ),
    ),
    card(
      'Price and signal changes',
      daysNav,
      chartEl,
      h(
        'ul',
        { class: 'legend', 'aria-label': 'Band colours' },
        LEVELS.map((l) => h('li', {}, h('span', { class: `swatch ${l}` }), LEVEL_LABEL[l])),
      ),
      h(
        'p',
        { class: 'small muted' },
        `Daily candles from ${p.source}, as of ${p.as_of}. Arrows mark the days the signal changed; the band shows the level in effect.`,
      ),
      gapNote(gaps),
      h(
        'p',
        { class: 'small muted' },
        'Chart: TradingView Lightweight Charts™, Copyright (c) 2025 TradingView, Inc., ',
        h('a', { href: 'https://www.tradingview.com/', text: 'tradingview.com' }),
        '.',
      ),
      p.signal_changes.length
        ? h(
            'details',
            {},
            h('summary', { text: `Signal changes in this window (${p.signal_changes.length})` }),
            h(
              'ul',
              { id: 'changes' },
              p.signal_changes.map((c) => h('li', {}, `${c.date}: `, level(c.previous_signal), ' → ', level(c.signal))),
            ),
          )
        : h('p', { class: 'muted', text: 'No signal change in this window.' }),
    ),
    card('Factor breakdown', ...factorBars(s)),
    ...(info?.chain ? [h('div', { id: 'chain-slot' })] : []),
    card('Signal history', historyEl),
  );
  loadCharts()
    .then((lib) => drawChart(chartEl, lib, p, gaps))
    .catch((e) => chartEl.replaceWith(h('p', { class: 'error', text: e.message })));
  if (info?.chain) {
    const ch = await data(`/chain-health/${info.chain}`);
    document.getElementById('chain-slot').replaceWith(healthCard(ch.data, asOf, `Chain health: ${ch.data.name}`));
  }
  await historySection(s.asset, historyEl);
}

// ---------------------------------------------------------------- chains

async function chainsPage() {
  setTitle('Chains');
  const health = await data('/chain-health');
  const asOf = health.meta.as_of;
  const metrics = await Promise.all(health.data.chains.map((c) => data(`/chain-metrics/${c.chain}`)));
  main.replaceChildren(
    h('h1', { text: 'Chain health' }),
    ...health.data.chains.map((c, i) => {
      const m = metrics[i].data;
      const section = healthCard(c, asOf, `${c.name} (${c.chain})`);
      section.append(
        h('h3', { id: `metrics-${c.chain}`, text: 'Raw metrics with 7-day change' }),
        scrollTable(
          { class: 'metrics', numeric: (i) => i > 0 && i < 4, labelledBy: `${idFor(`${c.name} (${c.chain})`)} metrics-${c.chain}` },
          ['Metric', 'Value', '7 d change', '7 d %', 'As of', 'Source'],
          Object.entries(m.metrics).map(([name, v]) =>
            h(
              'tr',
              {},
              h('td', { text: name }),
              h('td', { class: 'num' }, v.value === null ? h('span', { class: 'stale', text: 'missing' }) : num(v.value, 2)),
              h('td', { class: 'num' }, v.change_7d === null ? h('span', { class: 'muted', text: 'no data' }) : num(v.change_7d, 2)),
              h('td', { class: 'num' }, pct(v.change_7d_pct)),
              h('td', {}, freshness(v.as_of, asOf, v)),
              h('td', { class: 'small wrap', text: v.source }),
            ),
          ),
        ),
      );
      return section;
    }),
  );
}

// ---------------------------------------------------------------- track record

/** A ratio with `digits` decimals (a Sharpe of 1 is "1.00"); null → "n/a". */
const fixed = (v, digits = 2) => (v === null || v === undefined ? 'n/a' : Number(v).toFixed(digits));
/** A fraction as a percentage: 0.0559 → "5.6%" (`digits` decimals); null → "n/a". */
const fracPct = (v, digits = 0) => (v === null || v === undefined ? 'n/a' : `${(v * 100).toFixed(digits)}%`);
/** A fraction as signed percentage points: 0.0559 → "+5.6"; null → "n/a". */
const points = (v) => (v === null || v === undefined ? 'n/a' : `${v >= 0 ? '+' : ''}${(v * 100).toFixed(1)}`);
/**
 * A cell that is `good` (long/flat at least as good as buy-and-hold) gets class `up` and a
 * check mark, so that the judgement is not carried by colour alone (WCAG 1.4.1).
 */
const judged = (text, good) =>
  good
    ? h(
        'td',
        { class: 'num up' },
        `${text} `,
        h('span', { 'aria-hidden': 'true', text: '✓' }),
        h('span', { class: 'sr-only', text: '(meets target)' }),
      )
    : h('td', { class: 'num', text });

/**
 * A scrollable table after the sentence that explains and names it (scrollTable);
 * numeric columns (all but the first) right-aligned.
 */
function figuresTable(id, caption, heads, rows) {
  return [
    h('p', { class: 'small muted', id: `${id}-about`, text: caption }),
    // Named (not only described) by the sentence: a table without a name is announced as "table".
    scrollTable({ id, labelledBy: `${id}-about`, numeric: (i) => i > 0 }, heads, rows),
  ];
}

/** One row of the per-asset table: an asset's (or the pool's) walk-forward figures. */
function metricsRow(label, m) {
  const lf = m.long_flat;
  const bh = m.buy_and_hold;
  return h(
    'tr',
    { dataset: { asset: m.asset ?? 'pooled' } },
    h('th', { scope: 'row', text: label }),
    h('td', { class: 'num', text: fracPct(bh.total_return) }),
    h('td', { class: 'num', text: fixed(bh.sharpe) }),
    h('td', { class: 'num', text: fracPct(bh.max_drawdown) }),
    h('td', { class: 'num', text: fracPct(lf.total_return) }),
    judged(fixed(lf.sharpe), lf.sharpe !== null && bh.sharpe !== null && lf.sharpe >= bh.sharpe),
    judged(fracPct(lf.max_drawdown), lf.max_drawdown >= 0.6 * bh.max_drawdown),
    h('td', { class: 'num', text: fracPct(lf.exposure) }),
    h('td', { class: 'num', text: num(lf.trades, 0) }),
    h('td', { class: 'num', text: m.median_run_days === null ? 'n/a' : num(m.median_run_days, 1) }),
    h('td', { class: 'num', text: fracPct(m.reversed_within_3d, 1) }),
    h('td', { class: 'num', text: points(m.hit_rates.buy_edge_30d) }),
    h('td', { class: 'num', text: points(m.hit_rates.sell_edge_30d) }),
    h('td', { class: 'num', text: fixed(m.ic_30d, 3) }),
  );
}

/**
 * `/track-record`: how the served signal model did (GET /api/v1/track-record, the same
 * figures as docs/track-record.md): what is out of sample and what is not, the live period
 * after the model's data, the walk-forward figures per asset and pooled, each year on its
 * own, the level shares, confidence against hit rate, and the bands chosen each year.
 */
async function trackRecordPage() {
  setTitle('Track record');
  main.replaceChildren(
    h('h1', { text: 'Track record' }),
    h('p', { class: 'muted', id: 'tr-loading', text: 'Computing the backtest (a few seconds after a start)...' }),
  );
  const { data: t } = await data('/track-record');
  const w = t.walk_forward;
  const p = w.pooled;
  const live = t.live;
  const liveCard = card(
    'Live period',
    h('p', { id: 'tr-live' }, live.note),
    live.report
      ? h(
          'dl',
          { class: 'kv' },
          h('dt', { text: 'Window' }),
          h('dd', { text: `${live.from} → ${live.to} (${live.days} decision days)` }),
          h('dt', { text: 'Long/flat return, pooled' }),
          h('dd', {
            text: `${fracPct(live.report.pooled.long_flat.total_return, 1)} (buy-and-hold ${fracPct(live.report.pooled.buy_and_hold.total_return, 1)})`,
          }),
          h('dt', { text: 'Long/flat max drawdown' }),
          h('dd', {
            text: `${fracPct(live.report.pooled.long_flat.max_drawdown, 1)} (buy-and-hold ${fracPct(live.report.pooled.buy_and_hold.max_drawdown, 1)})`,
          }),
        )
      : null,
  );
  const heads = [
    'Asset',
    'B&H return',
    'B&H Sharpe',
    'B&H max DD',
    'L/F return',
    'L/F Sharpe',
    'L/F max DD',
    'Exposure',
    'Trades',
    'Median run (d)',
    'Reversed ≤3 d',
    'Buy edge (pts)',
    'Sell edge (pts)',
    'IC 30 d',
  ];
  main.replaceChildren(
    h('h1', { text: 'Track record' }),
    h(
      'p',
      { id: 'tr-summary' },
      `${t.model_version}, walk-forward ${w.from} → ${w.to}, ${w.cost_bps} bps per unit of position change; a position decided at the close of day t earns close t → close t+1. `,
      'Long/flat (L/F) holds an asset while its signal is buy or strong_buy; B&H is buy-and-hold. Sharpe is daily × √365. ',
      h('a', { href: '/api/v1/track-record', text: 'The same figures as JSON' }),
      '.',
    ),
    h(
      'p',
      { class: 'data-note', role: 'note', id: 'tr-caveat' },
      h('strong', { text: 'What is out of sample: ' }),
      `only the level bands, chosen each year on the data before it (table at the end). The model's structure (its factors, weights, gates and confirmation) was chosen with these same years in view, so read these figures as in-sample for it. The first fully out-of-sample test is the live period, from ${live.from}.`,
    ),
    liveCard,
    card(
      'Pooled',
      h(
        'dl',
        { class: 'kv', id: 'tr-pooled' },
        h('dt', { text: 'Long/flat Sharpe' }),
        h('dd', { text: `${fixed(p.long_flat.sharpe)} (buy-and-hold ${fixed(p.buy_and_hold.sharpe)})` }),
        h('dt', { text: 'Long/flat max drawdown' }),
        h('dd', { text: `${fracPct(p.long_flat.max_drawdown)} (buy-and-hold ${fracPct(p.buy_and_hold.max_drawdown)})` }),
        h('dt', { text: 'Long/flat return' }),
        h('dd', {
          text: `${fracPct(p.long_flat.total_return)} (buy-and-hold ${fracPct(p.buy_and_hold.total_return)}), in the market ${fracPct(p.long_flat.exposure)} of days`,
        }),
        h('dt', { text: 'Buy / sell edge' }),
        h('dd', {
          text: `${points(p.hit_rates.buy_edge_30d)} / ${points(p.hit_rates.sell_edge_30d)} points against the base rates of 30-day rises (${fracPct(p.hit_rates.p_up_30d, 1)}) and falls`,
        }),
        h('dt', { text: 'Information coefficient' }),
        h('dd', { text: `${fixed(p.ic_7d, 3)} (7 d), ${fixed(p.ic_30d, 3)} (30 d), Spearman` }),
        h('dt', { text: 'Level runs' }),
        h('dd', {
          text: `median ${num(p.median_run_days, 1)} days; ${fracPct(p.reversed_within_3d, 1)} of ${num(p.level_changes, 0)} changes reversed within 3 days`,
        }),
      ),
      h('p', {
        class: 'small muted',
        text: 'The pool is an equal-weight portfolio of the assets with data each day; its edges, ICs and runs pool all asset-days.',
      }),
    ),
    card(
      'Per asset',
      figuresTable(
        'tr-assets',
        'Walk-forward figures per asset; ✓ (green): long/flat Sharpe at least buy-and-hold’s, or long/flat max drawdown at most 60% of buy-and-hold’s.',
        heads,
        [...w.assets.map((a) => metricsRow(a.symbol, a)), metricsRow('Pooled', p)],
      ),
      ...w.assets
        .filter((a) => a.from > w.from)
        .map((a) => h('p', { class: 'small muted', text: `${a.symbol} is scored from its first day of data, ${a.from}.` })),
    ),
    card(
      'By year',
      figuresTable(
        'tr-years',
        'Each calendar year scored on its own, pooled; a year without a position has no long/flat Sharpe.',
        [
          'Year',
          'B&H return',
          'L/F return',
          'B&H Sharpe',
          'L/F Sharpe',
          'L/F Sharpe ≥ B&H',
          'Exposure',
          'Buy edge',
          'Sell edge',
          'IC 30 d',
        ],
        t.by_year.map((y) =>
          h(
            'tr',
            {},
            h('th', { scope: 'row', text: String(y.year) }),

            h('td', { class: 'num', text: fracPct(y.pooled.buy_and_hold.total_return) }),
            h('td', { class: 'num', text: fracPct(y.pooled.long_flat.total_return) }),
            h('td', { class: 'num', text: fixed(y.pooled.buy_and_hold.sharpe) }),
            h('td', { class: 'num', text: fixed(y.pooled.long_flat.sharpe) }),
            h('td', { class: 'num', text: `${y.long_flat_sharpe_wins.assets} of ${y.long_flat_sharpe_wins.of}` }),
            h('td', { class: 'num', text: fracPct(y.pooled.long_flat.exposure) }),
            h('td', { class: 'num', text: points(y.pooled.hit_rates.buy_edge_30d) }),
            h('td', { class: 'num', text: points(y.pooled.hit_rates.sell_edge_30d) }),
            h('td', { class: 'num', text: fixed(y.pooled.ic_30d, 3) }),
          ),
        ),
      ),
    ),
    card(
      'Levels and confidence',
      figuresTable(
        'tr-levels',
        'Share of asset-days per level, pooled.',
        ['Level', ...LEVELS.map((l) => LEVEL_LABEL[l])],
        [
          h(
            'tr',
            {},
            h('th', { scope: 'row', text: 'Share' }),
            LEVELS.map((l) => h('td', { class: 'num', text: fracPct(p.levels[l], 1) })),
          ),
        ],
      ),
      figuresTable(
        'tr-confidence',
        'Share of buy/strong_buy days followed by a 30-day rise and of sell/strong_sell days followed by a 30-day fall, by confidence.',
        ['Confidence', 'Asset-days', 'Hit rate'],
        p.confidence.map((c) =>
          h(
            'tr',
            {},
            h('th', { scope: 'row', text: `[${c.from}, ${c.to}${c.to === 1 ? ']' : ')'}` }),
            h('td', { class: 'num', text: num(c.days, 0) }),
            h('td', { class: 'num', text: fracPct(c.hit_rate, 1) }),
          ),
        ),
      ),
    ),
    card(
      'Walk-forward choices',
      figuresTable(
        'tr-choices',
        'The bands (|score| above which the level is buy/sell, and strong) chosen for each year by the pooled long/short Sharpe on the data up to the date shown.',
        ['Year', 'Trained through', 'Buy band', 'Strong band'],
        w.choices.map((c) =>
          h(
            'tr',
            {},
            h('th', { scope: 'row', text: String(c.year) }),
            h('td', { class: 'num', text: c.trained_through }),
            h('td', { class: 'num', text: fixed(c.bands.buy) }),
            h('td', { class: 'num', text: fixed(c.bands.strong) }),
          ),
        ),
      ),
    ),
  );
}

// ---------------------------------------------------------------- account: sign-in, keys, theses

/**
 * Says a refused field in `msg` by the field's label (`text`, e.g. "Key name: at most 100
 * characters"), marks `input` aria-invalid and described by `msg`, and focuses it. Edited, the
 * message no longer speaks of what is in the field, so it goes with the mark.
 */
function markInvalid(input, msg, text) {
  say(msg, text, 'error');
  input.setAttribute('aria-invalid', 'true');
  input.setAttribute('aria-describedby', msg.id);
  input.addEventListener(
    'input',
    () => {
      unmarkInvalid(input);
      say(msg, '');
    },
    { once: true },
  );
  input.focus();
}

/** Takes off `markInvalid`'s mark. */
function unmarkInvalid(el) {
  el.removeAttribute('aria-invalid');
  el.removeAttribute('aria-describedby');
}

/** The reason of a refused body field without the API's "Invalid body field 'x': " (the form says the field by its label). */
function fieldReason(message) {
  return message.replace(/^Invalid body field '[^']*': /, '');
}

function signInForm() {
  const msg = h('p', { class: 'msg', role: 'status', id: 'signin-msg' });
  if (signInNotice) {
    say(msg, signInNotice, 'error');
    signInNotice = null;
  }
  const email = h('input', { id: 'email', type: 'email', autocomplete: 'username', required: true, maxlength: 254 });
  const password = h('input', {
    id: 'password',
    type: 'password',
    autocomplete: 'current-password',
    required: true,
    minlength: 8,
    maxlength: 128,
  });
  // The service's own limit (README: a display name is 1 to 100 characters); maxlength counts
  // UTF-16 units, the service characters, so a name the box takes is never refused as too long.
  const name = h('input', { id: 'name', type: 'text', autocomplete: 'name', maxlength: CONFIG.nameMax });
  const form = h(
    'form',
    { class: 'stack', id: 'signin-form' },
    h('label', { for: 'email' }, 'Email', email),
    h('label', { for: 'password' }, 'Password', password),
    h('p', { class: 'small muted', text: CONFIG.passwordRules }),
    h('label', { for: 'name' }, 'Name (for a new account, optional)', name),
    h(
      'div',
      { class: 'row' },
      h('button', { type: 'submit', text: 'Sign in' }),
      h('button', { type: 'button', class: 'secondary', id: 'signup', text: 'Create account' }),
    ),
    msg,
  );
  const post = (what, b) =>
    fetchWithin(`/auth/${what}/email`, {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(b),
    }).then(async (res) => ({
      ok: res.ok,
      status: res.status,
      body: await res.json().catch(() => null),
    }));
  async function submit(kind) {
    if (!form.reportValidity()) return;
    const e = email.value.trim();
    const pw = password.value;
    say(msg, 'Working...');
    try {
      let r;
      if (kind === 'up') {
        r = await post('sign-up', { name: name.value.trim() || e.split('@')[0], email: e, password: pw });
        if (r.ok) {
          r = await post('sign-in', { email: e, password: pw });
          if (r.status === 401) return say(msg, 'If this email already has an account, sign in with its password.', 'error');
        }
      } else r = await post('sign-in', { email: e, password: pw });
      if (!r.ok) return say(msg, errorOf(r), 'error');
      jwtCache = null;
      // Signed in: the account page's own address, and the keyboard focus on its heading.
      if (location.pathname !== '/account') history.replaceState(null, '', '/account');
      await accountPage({ focus: true });
    } catch (err) {
      // The same words as every other account action that cannot reach the service; without an
      // answer in time the sign-up may have gone through, which the message says.
      say(
        msg,
        noAnswer(err)
          ? `No answer from the service within ${API_TIMEOUT_MS / 1000} seconds: try again in a moment${kind === 'up' ? '; if the account was created meanwhile, sign in with its password' : ''}.`
          : NETWORK_ERROR,
        'error',
      );
    }
  }
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    // Back to the account's own password after a Create account that did not go through.
    password.autocomplete = 'current-password';
    submit('in');
  });
  form.querySelector('#signup').addEventListener('click', () => {
    // A new account's password: a password manager offers to save it (and to generate one).
    password.autocomplete = 'new-password';
    submit('up');
  });
  return card('Sign in or create an account', h('p', { class: 'muted', text: 'Signed-in users create API keys and theses here.' }), form);
}

/**
 * The MCP client configuration for a new key: `mcpServers` with `type: "http"` (Claude Code
 * needs the type for a URL server; Cursor reads the same form). VS Code names the top level
 * `servers` instead, which the dialog says.
 */
function mcpSnippet(key) {
  return JSON.stringify(
    { mcpServers: { 'market-intel': { type: 'http', url: CONFIG.mcpUrl, headers: { Authorization: `Bearer ${key}` } } } },
    null,
    2,
  );
}

function showNewKey(created, onClose) {
  const status = h('p', { class: 'msg', role: 'status' });
  const snippet = mcpSnippet(created.key);
  const close = h('button', { type: 'button', class: 'secondary', text: 'Close' });
  const d = h(
    'dialog',
    { id: 'new-key-dialog', 'aria-labelledby': 'new-key-title' },
    h('h2', { id: 'new-key-title', text: `Your new API key "${created.name}"` }),
    h('p', { class: 'alert' }, 'Copy it now: you will not see it again.'),
    h('p', { class: 'key-value', id: 'new-key' }, h('code', { text: created.key })),
    h(
      'div',
      { class: 'row' },
      h('button', { type: 'button', id: 'copy-key', text: 'Copy key', onclick: () => copyText(created.key, status) }),
    ),
    h('h3', { text: 'MCP client configuration' }),
    h('p', {
      class: 'small muted',
      text: 'For Cursor (~/.cursor/mcp.json) and Claude Code (.mcp.json): paste into the MCP configuration. VS Code (.vscode/mcp.json) takes the same server under "servers" instead of "mcpServers".',
    }),
    h('pre', { id: 'mcp-snippet', text: snippet }),
    h(
      'div',
      { class: 'row' },
      h('button', {
        type: 'button',
        class: 'secondary',
        id: 'copy-mcp',
        text: 'Copy configuration',
        onclick: () => copyText(snippet, status),
      }),
      close,
    ),
    status,
  );
  const done = () => {
    d.close();
    d.remove();
    onClose();
  };
  close.addEventListener('click', done);
  d.addEventListener('cancel', (e) => {
    e.preventDefault();
    done();
  });
  document.body.append(d);
  d.showModal();
  d.querySelector('#copy-key').focus();
}

function keysSection(tierNote) {
  const msg = h('p', { class: 'msg', role: 'status', id: 'key-msg' });
  const list = h('div', { id: 'keys-list' });
  const nameInput = h('input', { id: 'key-name', type: 'text', maxlength: 64, placeholder: 'e.g. laptop', required: true });
  const genBtn = h('button', { type: 'submit', id: 'generate', text: 'Generate key' });
  const form = h('form', { class: 'row', id: 'key-form' }, h('label', { for: 'key-name', class: 'field' }, 'Key name', nameInput), genBtn);
  const limits = h('p', { id: 'tier-limits' });
  async function load() {
    const r = await api('GET', '/keys');
    if (!r.ok) return say(msg, errorOf(r), 'error');
    const keys = r.body.data.keys;
    const active = keys.filter((k) => k.status === 'active').length;
    const tier = keys.find((k) => k.status === 'active')?.tier ?? r.tier ?? 'free';
    const t = CONFIG.tiers[tier];
    limits.replaceChildren(
      'Your tier: ',
      h('strong', { id: 'tier', text: tier }),
      ` — ${t.minute} requests per minute${t.day === null ? ', no daily limit' : ` and ${t.day} per UTC day`} per key; `,
      h('strong', { text: `${active} of ${CONFIG.maxKeys}` }),
      ' active keys. Signal history needs the pro or api tier; the operator sets your plan.',
    );
    genBtn.disabled = active >= CONFIG.maxKeys;
    // The list is current again: an earlier failure (a network error) or limit no longer holds.
    say(msg, active >= CONFIG.maxKeys ? `You have ${CONFIG.maxKeys} active keys, the limit: revoke one to generate another.` : '');
    list.replaceChildren(
      keys.length === 0
        ? h('p', { class: 'muted', text: 'No keys yet.' })
        : scrollTable(
            { id: 'keys', numeric: (i) => i === 4 || i === 5 },
            ['Prefix', 'Name', 'Tier', 'Status', 'Today', 'Total', 'Last used', h('span', { class: 'muted', text: 'Actions' })],
            keys.map((k) =>
              h(
                'tr',
                { dataset: { keyId: k.id, prefix: k.prefix } },
                // data-label: the column's name, which a phone shows in the cell (app.css, #keys).
                h('td', { 'data-label': 'Prefix' }, h('code', { text: k.prefix + '…' })),
                // A long name wraps inside its cell instead of pushing Revoke off the screen.
                h('td', { class: 'key-name', text: k.name, title: k.name, 'data-label': 'Name' }),
                h('td', { text: k.tier, 'data-label': 'Tier' }),
                h('td', { class: 'status', text: k.status, 'data-label': 'Status' }),
                h('td', { class: 'num today', text: k.usage.requests_today, 'data-label': 'Today' }),
                h('td', { class: 'num total', text: k.usage.requests_total, 'data-label': 'Total' }),
                h('td', {
                  'data-label': 'Last used',
                  text: k.usage.last_used_at
                    ? new Date(k.usage.last_used_at).toISOString().replace('T', ' ').slice(0, 19) + ' UTC'
                    : 'never',
                }),
                h(
                  'td',
                  {},
                  k.status === 'active'
                    ? h('button', {
                        type: 'button',
                        class: 'danger revoke',
                        text: 'Revoke',
                        'aria-label': `Revoke key ${k.name} (${k.prefix})`,
                        onclick: async () => {
                          if (
                            !(await confirmDialog(
                              `Revoke the key "${k.name}" (${k.prefix}…)? Programs using it will get 401 at once. This cannot be undone.`,
                              'Revoke key',
                            ))
                          )
                            return;
                          const rr = await api('POST', '/keys/revoke', { key_id: k.id });
                          if (!rr.ok) return say(msg, errorOf(rr), 'error');
                          await load();
                          sayAndFocus(msg, `Key ${k.prefix}… revoked.`, 'ok');
                        },
                      })
                    : h('span', { class: 'muted', text: k.revoked_at ? `revoked ${k.revoked_at.slice(0, 10)}` : '' }),
                ),
              ),
            ),
          ),
      // The first page holds every active key (they come first); older revoked keys page on in the API.
      r.body.data.next_cursor
        ? h('p', {
            class: 'muted',
            id: 'keys-more',
            text: `Showing your active keys and the newest revoked ones (${keys.length}). Older revoked keys: GET /api/v1/keys with cursor = next_cursor.`,
          })
        : '',
    );
  }
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    if (!form.reportValidity()) return;
    unmarkInvalid(nameInput);
    const r = await whileDisabled(genBtn, () => api('POST', '/keys/create', { name: nameInput.value.trim() }));
    if (!r.ok && r.status === 400 && r.body?.error?.details?.field === 'name') {
      // A refused name (blank, invisible characters): said by the input's label, like the
      // thesis form's fields, the input marked and focused (README, "Web dashboard").
      return markInvalid(nameInput, msg, `Key name: ${fieldReason(errorOf(r))}`);
    }
    if (!r.ok) return say(msg, errorOf(r), 'error');
    nameInput.value = '';
    say(msg, '');
    await load();
    showNewKey(r.body.data, () => nameInput.focus());
  });
  load();
  return card(
    'API keys',
    tierNote,
    limits,
    form,
    msg,
    list,
    h(
      'div',
      { class: 'row' },
      h('button', { type: 'button', class: 'secondary', id: 'refresh-keys', text: 'Refresh usage', onclick: () => load() }),
    ),
  );
}

/**
 * The condition metrics an asset has no data for, each with the reason, from its
 * `capabilities` in GET /assets (the API refuses a condition on them): `{metric: reason}`.
 */
function lackingMetrics(asset, assets) {
  const out = {};
  if (!asset) return out;
  if (!asset.capabilities.funding_rate) out.funding_rate = `${asset.symbol} has no funding-rate data`;
  if (!asset.capabilities.chain_health) {
    const withChain = assets.filter((a) => a.capabilities.chain_health).map((a) => a.symbol);
    out.chain_health_score = `${asset.symbol} has no chain health score (${withChain.join(', ')} have one)`;
  }
  return out;
}

/**
 * Adds one condition row to `container`. `lacking()` gives the selected asset's metrics
 * without data (`lackingMetrics`): those options are disabled, and a row left on one is
 * invalid with the reason, so the form says why before the API would. `row.checkMetric()`
 * re-applies this when the asset changes. `afterLast` takes the keyboard focus when the last
 * row left is removed (the "Add condition" button).
 */
function conditionRow(container, lacking = () => ({}), afterLast = null) {
  const metric = h(
    'select',
    { 'aria-label': 'Metric', class: 'c-metric', 'data-field': 'metric' },
    THESIS_METRICS.map((m) => h('option', { value: m, text: m })),
  );
  const value = h('input', { 'aria-label': 'Value', class: 'c-value', 'data-field': 'value', required: true, size: 10 });
  // The value box fits the metric: a number, or a level name the browser checks before sending.
  const LEVEL_NAMES = { signal: LEVELS, regime: CONFIG.regimeLevels };
  const fitValue = () => {
    const names = LEVEL_NAMES[metric.value];
    if (names) {
      value.type = 'text';
      value.pattern = names.join('|');
      value.title = `one of ${names.join(', ')}`;
      value.placeholder = names.join(' / ');
    } else {
      value.type = 'number';
      value.step = 'any';
      value.removeAttribute('pattern');
      value.title = 'a number';
      value.placeholder = 'number';
    }
  };
  const checkMetric = () => {
    const out = lacking();
    for (const o of metric.options) o.disabled = o.value in out;
    metric.setCustomValidity(out[metric.value] ? `${out[metric.value]}: choose another metric` : '');
  };
  metric.addEventListener('change', () => {
    checkMetric();
    fitValue();
  });
  fitValue();
  const op = h(
    'select',
    { 'aria-label': 'Operator', class: 'c-op', 'data-field': 'operator' },
    Object.entries(OPERATORS).map(([k, v]) => h('option', { value: k, text: `${v} (${k})` })),
  );
  const kind = h(
    'select',
    { 'aria-label': 'Kind', class: 'c-kind', 'data-field': 'kind' },
    h('option', { value: 'invalidation', text: 'invalidation' }),
    h('option', { value: 'warning', text: 'warning' }),
  );
  // Removed, the keyboard goes on at the next condition (or the one before, or `afterLast`
  // when none is left) instead of falling back to the top of the page with the button.
  const remove = () => {
    const next = row.nextElementSibling ?? row.previousElementSibling;
    row.remove();
    numberConditions(container);
    (next?.querySelector('.c-metric') ?? afterLast)?.focus();
  };
  const row = h(
    'div',
    { class: 'row cond', role: 'group' },
    metric,
    op,
    value,
    kind,
    h('button', { type: 'button', class: 'secondary c-remove', text: 'Remove', onclick: remove }),
  );
  row.checkMetric = checkMetric;
  checkMetric();
  container.append(row);
  numberConditions(container);
  return row;
}

/**
 * Names each condition row "Condition N" (a group, so a screen reader says which condition
 * its Metric, Operator, Value and Kind are) and its button "Remove condition N", in order:
 * the numbers a refused condition's message uses ("Condition 2, value: ...").
 */
function numberConditions(container) {
  container.querySelectorAll('.cond').forEach((row, i) => {
    row.setAttribute('aria-label', `Condition ${i + 1}`);
    row.querySelector('.c-remove').setAttribute('aria-label', `Remove condition ${i + 1}`);
  });
}

function thesesSection(assets) {
  const msg = h('p', { class: 'msg', role: 'status', id: 'thesis-msg' });
  const list = h('div', { id: 'theses-list' });
  const conds = h('div', { id: 'conditions' });
  const submit = h('button', { type: 'submit', id: 'create-thesis', text: 'Create thesis' });
  /**
   * A labelled input of the form for the POST /thesis field `name`: the input carries
   * data-field (the API's name, as a refusal's details.field gives it) and data-label (the
   * label's words, which the refusal's message says), so neither is looked up in the markup.
   */
  const field = (name, label, input) => {
    input.dataset.field = name;
    input.dataset.label = label;
    return h('label', { for: input.id }, label, input);
  };
  const form = h(
    'form',
    { class: 'stack', id: 'thesis-form' },
    h(
      'div',
      { class: 'row' },
      field(
        'asset',
        'Asset',
        h(
          'select',
          { id: 't-asset' },
          assets.map((a) => h('option', { value: a.asset, text: `${a.symbol} (${a.name})` })),
        ),
      ),
      field(
        'direction',
        'Direction',
        h('select', { id: 't-direction' }, h('option', { value: 'long', text: 'long' }), h('option', { value: 'short', text: 'short' })),
      ),
    ),
    field('title', 'Title', h('input', { id: 't-title', required: true, maxlength: 200 })),
    h(
      'div',
      { class: 'row' },
      field('entry_price', 'Entry price (USD)', h('input', { id: 't-entry', type: 'number', step: 'any', min: 0 })),
      field('target_price', 'Target price', h('input', { id: 't-target', type: 'number', step: 'any', min: 0 })),
      field('stop_price', 'Stop price', h('input', { id: 't-stop', type: 'number', step: 'any', min: 0 })),
      field('horizon_days', 'Horizon (days)', h('input', { id: 't-horizon', type: 'number', step: 1, min: 1, max: 3650 })),
    ),
    h(
      'fieldset',
      {},
      h('legend', { text: 'Conditions (signal and regime take a level, e.g. sell or bear; the others a number)' }),
      conds,
      h('button', {
        type: 'button',
        class: 'secondary',
        id: 'add-condition',
        text: 'Add condition',
        // The new row's first control takes the focus: a screen reader says "Condition N".
        onclick: (ev) => conditionRow(conds, lacking, ev.currentTarget).querySelector('.c-metric').focus(),
      }),
    ),
    h('div', { class: 'row' }, submit),
    msg,
  );
  const val = (id) => form.querySelector(`#${id}`).value.trim();
  const lacking = () =>
    lackingMetrics(
      assets.find((a) => a.asset === val('t-asset')),
      assets,
    );
  form.querySelector('#t-asset').addEventListener('change', () => {
    for (const row of conds.querySelectorAll('.cond')) row.checkMetric();
  });
  const numOrNull = (id) => (val(id) === '' ? null : Number(val(id)));
  /**
   * Shows a refused thesis in the form's words. A 400 that names a field (`details.field`,
   * e.g. stop_price or conditions.0.value) is said by that input's label ("Stop price: ..."
   * rather than "Invalid body field 'stop_price': ..."): the input whose data-field is the
   * field's name (a condition's, in the condition's row), by its data-label (a condition's, as
   * "Condition N, " and its aria-label). The input is marked aria-invalid,
   * described by the message (aria-describedby) and focused once the message is there; the
   * mark and the message go when it is edited. Any other failure is said as the API words it.
   */
  const refused = (r) => {
    const message = errorOf(r);
    const field = r.body?.error?.details?.field;
    const cond = typeof field === 'string' ? /^conditions\.(\d+)\.(metric|operator|value|kind)$/.exec(field) : null;
    const row = cond ? conds.querySelectorAll('.cond')[Number(cond[1])] : null;
    // A top-level field is never a condition's input (whose data-field is within its row).
    const input =
      r.status !== 400 || typeof field !== 'string'
        ? null
        : cond
          ? row?.querySelector(`[data-field="${cond[2]}"]`)
          : form.querySelector(`[data-field="${CSS.escape(field)}"]:not(.cond *)`);
    if (!input) return say(msg, message, 'error');
    const label = cond
      ? `Condition ${Number(cond[1]) + 1}, ${(input.getAttribute('aria-label') ?? cond[2]).toLowerCase()}`
      : input.dataset.label;
    const reason = fieldReason(message);
    markInvalid(
      input,
      msg,
      `${label}: ${reason.replace(/\b(entry|target|stop)_price\b/g, '$1 price').replace(/\bhorizon_days\b/g, 'horizon')}`,
    );
  };
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    if (!form.reportValidity()) return;
    const conditions = [...conds.querySelectorAll('.cond')].map((row) => {
      const metric = row.querySelector('.c-metric').value;
      const raw = row.querySelector('.c-value').value.trim();
      return {
        metric,
        operator: row.querySelector('.c-op').value,
        value: metric === 'signal' || metric === 'regime' ? raw : Number(raw),
        kind: row.querySelector('.c-kind').value,
      };
    });
    const body = {
      asset: val('t-asset'),
      direction: val('t-direction'),
      title: val('t-title'),
      entry_price: numOrNull('t-entry'),
      target_price: numOrNull('t-target'),
      stop_price: numOrNull('t-stop'),
      horizon_days: numOrNull('t-horizon'),
      conditions,
    };
    // One thesis per click: the button is off until the answer (a double click made two).
    say(msg, '');
    for (const el of form.querySelectorAll('[aria-invalid]')) unmarkInvalid(el);
    const r = await whileDisabled(submit, () => api('POST', '/thesis', body));
    if (!r.ok) return refused(r);
    form.reset();
    conds.replaceChildren();
    const failed = await load();
    say(msg, failed ? `Thesis created, but the list could not be refreshed: ${failed}` : 'Thesis created.', failed ? 'error' : 'ok');
  });
  /**
   * One page of theses (with their health) after `cursor`, appended to the list; the first page
   * replaces it. Returns null, or the failure's message when the page could not be read.
   */
  async function load(cursor = null) {
    // One request per page for the theses and every health (each request counts against the tier's quota).
    const r = await api('GET', `/thesis?include_health=true${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    if (!r.ok) {
      // A failed later page keeps its button, so it can be asked again.
      if (cursor) say(msg, errorOf(r), 'error');
      // The first page read again after a create or delete (e.g. a 429 of the tier's minute
      // quota): the theses already listed stay, the caller says why the list is not refreshed.
      else if (!list.querySelector('article.thesis')) list.replaceChildren(h('p', { class: 'error', text: errorOf(r) }));
      return errorOf(r);
    }
    const { theses, next_cursor } = r.body.data;
    if (!cursor && theses.length === 0) {
      list.replaceChildren(h('p', { class: 'muted', text: 'No theses yet.' }));
      return null;
    }
    const more = next_cursor
      ? h('button', {
          type: 'button',
          class: 'more secondary',
          text: 'Show older theses',
          // Disabled while its page loads: a second click would ask for the same page again.
          onclick: async (ev) => {
            await whileDisabled(ev.currentTarget, () => load(next_cursor));
          },
        })
      : null;
    const articles = theses.map(thesisArticle);
    if (cursor) list.querySelector('.more')?.replaceWith(...articles, ...(more ? [more] : []));
    else list.replaceChildren(...articles, ...(more ? [more] : []));
    // After "Show older theses", the keyboard goes on at the first of the theses it added.
    if (cursor && articles[0]) {
      articles[0].tabIndex = -1;
      articles[0].focus();
    }
    return null;
  }
  /** One thesis with its health, and its delete button. */
  function thesisArticle(t) {
    const health = t.health ?? null;
    const article = h(
      'article',
      { class: `thesis${health?.action_required ? ' action' : ''}`, dataset: { thesisId: t.id } },
      h('h3', {}, `${t.title} `, h('span', { class: 'muted', text: `${t.symbol} ${t.direction}` })),
      h(
        'p',
        { class: 'small' },
        `Entry ${price(t.entry_price)} · target ${price(t.target_price)} · stop ${price(t.stop_price)} · ` +
          (t.horizon_days === null ? 'no horizon' : `horizon ${t.horizon_days} d`),
      ),
      // The id an MCP client asks get_thesis_health for.
      h('p', { class: 'small muted thesis-id' }, 'Id (for get_thesis_health): ', h('code', { text: t.id })),
      health?.horizon
        ? h('p', {
            class: `small horizon${health.horizon.passed ? ' alert' : ''}`,
            text: health.horizon.passed
              ? `Horizon passed on ${health.horizon.ends_at.slice(0, 10)} UTC: review the thesis`
              : `Horizon ends ${health.horizon.ends_at.slice(0, 10)} UTC (${health.horizon.days_left} ${health.horizon.days_left === 1 ? 'day' : 'days'} left)`,
          })
        : null,
      health
        ? h(
            'div',
            { class: 'health' },
            health.action_required ? h('p', { class: 'alert', text: 'Action required' }) : null,
            h(
              'p',
              {},
              'Health: ',
              h('strong', { text: health.health_score === null ? 'not evaluable' : `${num(health.health_score, 0)} / 100` }),
              ` (${health.status}), as of ${health.as_of}`,
            ),
            health.stale ? h('p', { class: 'stale small', text: `Stale inputs: ${health.stale_reason}` }) : null,
            health.triggered_conditions.length
              ? h(
                  'div',
                  {},
                  h('p', { text: 'Triggered conditions:' }),
                  h(
                    'ul',
                    { class: 'cond-list triggered' },
                    health.triggered_conditions.map((c) =>
                      h(
                        'li',
                        { class: c.kind === 'invalidation' ? 'error' : '' },
                        h('strong', { text: c.kind }),
                        ` ${c.metric} ${OPERATORS[c.operator]} ${c.value} (now ${typeof c.current_value === 'number' ? num(c.current_value, 4) : c.current_value})`,
                      ),
                    ),
                  ),
                )
              : h('p', { class: 'muted', text: 'No condition triggered.' }),
            health.unevaluable_conditions.length
              ? h(
                  'ul',
                  { class: 'cond-list' },
                  health.unevaluable_conditions.map((c) => h('li', { class: 'muted', text: `${c.metric}: not evaluable (${c.reason})` })),
                )
              : null,
          )
        : h('p', { class: 'error', text: `Health unavailable: ${t.health_error?.message ?? 'not evaluated'}` }),
      h('button', {
        type: 'button',
        class: 'danger',
        text: 'Delete',
        'aria-label': `Delete thesis ${t.title}`,
        onclick: async () => {
          if (!(await confirmDialog(`Delete the thesis "${t.title}"?`, 'Delete thesis'))) return;
          const rr = await api('DELETE', `/thesis/${t.id}`);
          if (!rr.ok) return say(msg, errorOf(rr), 'error');
          // Gone from the list also when the list cannot be read again.
          article.remove();
          const failed = await load();
          sayAndFocus(
            msg,
            failed ? `Thesis "${t.title}" deleted, but the list could not be refreshed: ${failed}` : `Thesis "${t.title}" deleted.`,
            failed ? 'error' : 'ok',
          );
        },
      }),
    );
    return article;
  }
  load();
  return card(
    'Theses',
    h('p', { class: 'small muted', text: 'Theses count against your tier quota, like the API.' }),
    form,
    h('h3', { text: 'Your theses' }),
    list,
  );
}

/**
 * The account page: the sign-in form, or the signed-in user's keys and theses. With `focus`
 * (after signing in or out, which replaces the page under the focused button), the keyboard
 * focus goes to the page's heading instead of being lost to the body.
 */
async function accountPage({ focus = false } = {}) {
  await renderAccount();
  if (focus) {
    const h1 = main.querySelector('h1');
    h1.tabIndex = -1;
    h1.focus();
  }
}
async function renderAccount() {
  setTitle('Account');
  if (CONFIG.signIn !== 'embedded') {
    main.replaceChildren(
      h('h1', { text: 'Account' }),
      card(
        'Sign in',
        h(
          'p',
          {},
          'This service uses an external identity provider: ',
          h('a', { href: CONFIG.signIn, text: CONFIG.signIn }),
          '. Get a JWT there, then create API keys with ',
          h('code', { text: 'POST /api/v1/keys/create' }),
          '.',
        ),
      ),
    );
    return;
  }
  const token = await jwt();
  if (!token) {
    main.replaceChildren(h('h1', { text: 'Account' }), signInForm());
    return;
  }
  signInNotice = null; // still signed in after all: no notice for a later sign-in form
  const assets = (await data('/assets')).data.assets.filter((a) => a.capabilities.thesis);
  const signOut = h('button', {
    type: 'button',
    class: 'secondary',
    id: 'signout',
    text: 'Sign out',
    onclick: async () => {
      const res = await fetchWithin('/auth/sign-out', {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      }).catch((e) => e);
      // Still signed in when the service was not reached or refused: say so, keep the page.
      if (!(res instanceof Response) || !res.ok)
        return sayAndFocus(
          signOutMsg,
          res instanceof Response
            ? `Sign-out failed (HTTP ${res.status}): try again.`
            : noAnswer(res)
              ? `No answer from the service within ${API_TIMEOUT_MS / 1000} seconds: you may still be signed in; try again.`
              : NETWORK_ERROR,
          'error',
        );
      jwtCache = null;
      await accountPage({ focus: true });
    },
  });
  const signOutMsg = h('span', { class: 'msg', role: 'status', id: 'signout-msg' });
  main.replaceChildren(
    h('h1', { text: 'Account' }),
    h('p', {}, 'Signed in as ', h('strong', { id: 'who', text: jwtCache.email }), ' ', signOut, ' ', signOutMsg),
    keysSection(
      h('p', {
        class: 'small muted',
        text: "Keys are for the API and MCP; the dashboard itself needs none. Its market pages do not count against your quota; your theses (listed, created and deleted below through the API) do, as your tier's requests.",
      }),
    ),
    thesesSection(assets),
  );
}

// ---------------------------------------------------------------- router

/**
 * Offline, a note above every page that the figures are the bundled dataset's, with its last
 * day and how many days before today (UTC) that is: the answers themselves are judged fresh
 * against that day, so without it a reader would take them for today's (PageConfig.dataMode).
 * Today is the server's UTC day when it sent the page (PageConfig.today), not the browser's,
 * whose clock may be off. A landmark of its own (`<aside>` named "Data source", between the
 * header and `main`), so a screen reader's list of landmarks reaches it; outside `main`, which
 * each render replaces.
 */
function dataNote() {
  if (CONFIG.dataMode !== 'offline' || !CONFIG.dataAsOf) return;
  const today = CONFIG.today ?? new Date().toISOString().slice(0, 10);
  const age = Math.max(0, daysBetween(CONFIG.dataAsOf, today));
  const note = h(
    'aside',
    { class: 'data-note', id: 'data-note', 'aria-label': 'Data source' },
    h('strong', { text: 'Offline mode: ' }),
    `every figure here comes from the bundled historical dataset, which ends on ${CONFIG.dataAsOf}, ${age} day${age === 1 ? '' : 's'} before today (${today} UTC). These are not live prices or signals.`,
  );
  main.before(note);
}

async function route() {
  const path = location.pathname.replace(/\/+$/, '') || '/';
  const nav =
    path === '/'
      ? 'overview'
      : path.startsWith('/chains')
        ? 'chains'
        : path === '/track-record'
          ? 'track-record'
          : path === '/account' || path === '/signin'
            ? 'account'
            : null;
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  // The script runs: the page's fallback for when it does not (page.ts, app.css) goes.
  document.getElementById('load-fallback')?.remove();
  // Set here, not in the page's markup: without JavaScript the page is not loading anything.
  main.setAttribute('aria-busy', 'true');
  try {
    if (path === '/') await overview();
    else if (path.startsWith('/asset/')) await assetPage(decodeURIComponent(path.slice('/asset/'.length)));
    else if (path === '/chains') await chainsPage();
    else if (path === '/track-record') await trackRecordPage();
    else await accountPage();
  } catch (e) {
    main.replaceChildren(
      h('h1', { text: e.status === 404 ? (path.startsWith('/asset/') ? 'Asset not available' : 'Not found') : 'Something went wrong' }),
      h('p', { class: 'error', text: e.message }),
      h(
        'p',
        {},
        // The same page again (a 404 would only answer the same).
        e.status === 404 ? null : [h('a', { href: location.href, text: 'Try again' }), path === '/' ? null : ' · '],
        path === '/' && e.status !== 404 ? null : h('a', { href: '/', text: 'Back to the overview' }),
      ),
    );
  }
  // Loaded (or failed): a screen reader may read the page now.
  main.removeAttribute('aria-busy');
  document.body.dataset.ready = 'true';
  // Read by `npm run bench` (bench/dashboard.ts): the page has its data rendered and is interactive.
  performance.mark('dashboard-ready');
}

dataNote();
route();
