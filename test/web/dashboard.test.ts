import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { eq } from 'drizzle-orm';
import type { Service } from '../../src/server.ts';
import { apiKeys } from '../../src/store/schema.ts';
import {
  axeViolations,
  CHROMIUM_SKIP,
  chromiumAvailable,
  launchChromium,
  seriousViolations,
  startDashboardService,
} from '../helpers/browser.ts';

// The dashboard end to end in a real browser (Debian's Chromium through playwright-core), on
// the real service with its embedded identity provider: sign up, API keys, the asset chart,
// theses, the phone-width overview, and axe-core on every page.

const SKIP = chromiumAvailable() ? false : CHROMIUM_SKIP;
if (SKIP) console.log(SKIP);

let svc: Service;
let base = '';
let browser: Browser;
const PASSWORD = 'correct horse battery staple';

/** Waits until app.js has rendered the page (it sets body[data-ready] when done). */
async function open(page: Page, path: string): Promise<void> {
  await page.goto(`${base}${path}`);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
}

/** Signs up a new account through the page's form; the page then shows the signed-in account. */
async function signUp(page: Page, email: string, path = '/account'): Promise<void> {
  await open(page, path);
  await page.fill('#email', email);
  await page.fill('#password', PASSWORD);
  await page.fill('#name', 'E2E');
  await page.click('#signup');
  await page.waitForSelector('#who', { timeout: 30_000 });
  assert.equal(await page.textContent('#who'), email.toLowerCase());
}

/**
 * Browser errors a page met: exceptions, CSP refusals and console errors, and responses of
 * 400 or more, except the 403 TIER_REQUIRED of the signal history for a free user, which the
 * page expects and explains (the browser logs every failed load as a console error; those are
 * judged by their response here).
 */
function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('response', (r) => {
    const expected = r.status() === 403 && new URL(r.url()).pathname.startsWith('/app/data/signal-history/');
    if (r.status() >= 400 && !expected) errors.push(`${r.status()} ${r.url()}`);
  });
  return errors;
}

before(async () => {
  if (SKIP) return;
  ({ svc, base } = await startDashboardService());
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await svc?.stop();
});

describe('dashboard in Chromium', { skip: SKIP }, () => {
  let ctx: BrowserContext;
  let page: Page;
  let errors: string[];

  before(async () => {
    if (SKIP) return;
    ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
    page = await ctx.newPage();
    errors = watchErrors(page);
  });
  after(() => ctx?.close());

  test('sign up, generate a key, copy it from the dialog; it works, shows usage 1, and once revoked gets 401', async () => {
    await signUp(page, `E2E.${Date.now()}@Example.com`, '/signin');
    // Signed in from /signin: the address is the account page's, the focus on its heading.
    assert.equal(new URL(page.url()).pathname, '/account');
    assert.deepEqual(await page.evaluate(() => [document.activeElement?.tagName, document.activeElement?.textContent]), ['H1', 'Account']);
    await page.waitForSelector('#tier');
    assert.equal(await page.textContent('#tier'), 'free');
    assert.match((await page.textContent('#tier-limits')) ?? '', /10 requests per minute and 50 per UTC day per key; 0 of 5 active keys/);

    await page.fill('#key-name', 'e2e-laptop');
    await page.click('#generate');
    const dialog = page.locator('#new-key-dialog');
    await dialog.waitFor({ state: 'visible' });
    assert.match((await dialog.textContent()) ?? '', /you will not see it again/i);
    const shown = ((await page.textContent('#new-key')) ?? '').trim();
    assert.match(shown, /^svc_live_[A-Za-z0-9]{38}$/);
    await page.click('#copy-key');
    await page.waitForFunction(() => document.querySelector('#new-key-dialog .msg')?.textContent?.includes('Copied'));
    const copied = await page.evaluate(() => navigator.clipboard.readText());
    assert.equal(copied, shown, 'the clipboard holds the key the dialog shows');
    // The MCP configuration snippet has the new key filled in.
    const snippet = JSON.parse((await page.textContent('#mcp-snippet')) ?? '{}');
    assert.equal(snippet.mcpServers['market-intel'].headers.Authorization, `Bearer ${copied}`);
    assert.equal(snippet.mcpServers['market-intel'].url, `${base}/mcp`);
    assert.equal(snippet.mcpServers['market-intel'].type, 'http');
    await dialog.getByRole('button', { name: 'Close' }).click();
    await dialog.waitFor({ state: 'detached' });

    // The copied key works on the API.
    const ok = await fetch(`${base}/api/v1/signals`, { headers: { authorization: `Bearer ${copied}` } });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get('x-service-tier'), 'free');

    // It is listed with its usage: 1 request today and in total.
    const prefix = copied.slice(0, 13);
    const row = page.locator(`#keys tr[data-prefix="${prefix}"]`);
    await page.click('#refresh-keys');
    await page.waitForFunction((p) => document.querySelector(`#keys tr[data-prefix="${p}"] .today`)?.textContent === '1', prefix);
    assert.equal(await row.locator('.total').textContent(), '1');
    assert.equal(await row.locator('.status').textContent(), 'active');
    assert.match((await row.textContent()) ?? '', /e2e-laptop/);
    assert.doesNotMatch((await page.content()).replace(/#new-key-dialog[\s\S]*/, ''), new RegExp(copied), 'the list never shows the key');

    // Revoke, with a confirmation; then the key gets 401.
    await row.getByRole('button', { name: /Revoke key/ }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke key' }).click();
    await page.waitForFunction((p) => document.querySelector(`#keys tr[data-prefix="${p}"] .status`)?.textContent === 'revoked', prefix);
    const refused = await fetch(`${base}/api/v1/signals`, { headers: { authorization: `Bearer ${copied}` } });
    assert.equal(refused.status, 401);
    assert.match(((await refused.json()) as { error: { message: string } }).error.message, /revoked/);

    // With more keys than a page holds (50 older revoked ones, stored directly: key management
    // allows 30 requests a minute), the list says where the rest are.
    assert.equal(await page.locator('#keys-more').count(), 0);
    const userId = (await svc.database.db.select({ userId: apiKeys.userId }).from(apiKeys).where(eq(apiKeys.prefix, prefix)))[0]!.userId;
    await svc.database.db.insert(apiKeys).values(
      Array.from({ length: 50 }, (_, i) => ({
        userId,
        name: `old-${i}`,
        prefix: 'svc_live_0ld0',
        keyHash: `e2e-old-${i}-${prefix}`,
        status: 'revoked' as const,
        createdAt: new Date(Date.UTC(2026, 0, 1, 0, i)).toISOString(),
        revokedAt: new Date(Date.UTC(2026, 0, 2)).toISOString(),
      })),
    );
    await page.click('#refresh-keys');
    await page.locator('#keys-more').waitFor({ state: 'visible' });
    assert.match((await page.textContent('#keys-more')) ?? '', /active keys and the newest revoked ones \(50\).*cursor = next_cursor/);
    assert.equal(await page.locator('#keys tbody tr').count(), 50);
    assert.deepEqual(errors, []);
  });

  test('create a thesis with an invalidation condition and see its health', async () => {
    await open(page, '/account');
    await page.selectOption('#t-asset', 'bitcoin');
    await page.selectOption('#t-direction', 'long');
    await page.fill('#t-title', 'BTC stays above 1 USD');
    await page.fill('#t-entry', '100000');
    await page.fill('#t-stop', '90000');
    await page.fill('#t-target', '130000');
    await page.fill('#t-horizon', '30');
    await page.click('#add-condition');
    const cond = page.locator('#conditions .cond').first();
    await cond.locator('.c-metric').selectOption('price_usd');
    await cond.locator('.c-op').selectOption('gt');
    await cond.locator('.c-value').fill('1');
    await cond.locator('.c-kind').selectOption('invalidation');
    await page.click('#thesis-form button[type=submit]');
    const thesis = page.locator('#theses-list article.thesis').first();
    await thesis.locator('.health').waitFor({ timeout: 30_000 });
    const text = (await thesis.textContent()) ?? '';
    assert.match(text, /BTC stays above 1 USD/);
    assert.match(text, /Action required/, 'an invalidation that holds requires action');
    assert.match(text, /Health: .*\(invalidated\)/);
    assert.match((await thesis.locator('.triggered').textContent()) ?? '', /invalidation price_usd > 1 \(now [\d,.]+\)/);
    assert.equal(await thesis.getAttribute('class'), 'thesis action');
    // The 30-day horizon, counted from now (the wall clock), not from the data's as-of day.
    const ends = new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10);
    const horizon = (await thesis.locator('.horizon').textContent()) ?? '';
    assert.match(horizon, /^Horizon ends (\d{4}-\d{2}-\d{2}) UTC \(30 days left\)$/);
    assert.ok(Math.abs(Date.parse(horizon.slice(13, 23)) - Date.parse(ends)) <= 86_400_000, horizon);

    // Deleting it, with a confirmation: a message says so and takes the keyboard focus (the
    // list that held the Delete button is re-rendered).
    const id = await thesis.getAttribute('data-thesis-id');
    // Shown for MCP clients (get_thesis_health takes it).
    assert.equal(await thesis.locator('.thesis-id code').textContent(), id);
    await thesis.getByRole('button', { name: /Delete thesis/ }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete thesis' }).click();
    await page.waitForFunction((t) => !document.querySelector(`[data-thesis-id="${t}"]`), id);
    // The article goes at once; the message comes once the list has been read again.
    await page.getByText('Thesis "BTC stays above 1 USD" deleted.').waitFor();
    const focused = await page.evaluate(() => ({ cls: document.activeElement?.className, text: document.activeElement?.textContent }));
    assert.deepEqual(focused, { cls: 'msg ok', text: 'Thesis "BTC stays above 1 USD" deleted.' });
    assert.deepEqual(errors, []);
  });

  test('the thesis form offers only the condition metrics the chosen asset has data for', async () => {
    await open(page, '/account');
    await page.selectOption('#t-asset', 'ethereum');
    await page.click('#add-condition');
    const metric = page.locator('#conditions .cond').last().locator('.c-metric');
    const disabled = () => metric.evaluate((s: HTMLSelectElement) => [...s.options].filter((o) => o.disabled).map((o) => o.value));
    assert.deepEqual(await disabled(), [], 'ETH has funding and chain health');
    await metric.selectOption('funding_rate');
    assert.equal(await metric.evaluate((s: HTMLSelectElement) => s.validationMessage), '');
    // LINK has neither: both options are disabled, and the row left on funding_rate says why.
    await page.selectOption('#t-asset', 'chainlink');
    assert.deepEqual(await disabled(), ['funding_rate', 'chain_health_score']);
    assert.equal(
      await metric.evaluate((s: HTMLSelectElement) => s.validationMessage),
      'LINK has no funding-rate data: choose another metric',
    );
    const chainHint = await metric.evaluate((s: HTMLSelectElement) => {
      s.value = 'chain_health_score';
      s.dispatchEvent(new Event('change'));
      return s.validationMessage;
    });
    assert.equal(chainHint, 'LINK has no chain health score (ETH, SOL, HYPE have one): choose another metric');
    await metric.selectOption('rsi_14');
    assert.equal(await metric.evaluate((s: HTMLSelectElement) => s.validationMessage), '');
    // The value box fits the metric: a number for rsi_14, a level name for signal.
    const value = page.locator('#conditions .cond').last().locator('.c-value');
    assert.equal(await value.getAttribute('type'), 'number');
    await metric.selectOption('signal');
    assert.equal(await value.getAttribute('type'), 'text');
    await value.fill('sel');
    assert.equal(await value.evaluate((i: HTMLInputElement) => i.validity.patternMismatch), true);
    await value.fill('sell');
    assert.equal(await value.evaluate((i: HTMLInputElement) => i.validity.valid), true);
    assert.deepEqual(errors, []);
  });

  test('more than a page of theses: "Show older theses" adds the next page and takes the focus', async () => {
    const session = await page.evaluate(() => fetch('/auth/get-session').then((r) => r.json()));
    const { id: userId, email } = session.user as { id: string; email: string };
    // Seeded through the service (52 creations through the API would pass the free tier's quota).
    for (let i = 0; i < 52; i++)
      await svc.theses.create(userId, email, { asset: 'ETH', direction: 'long', title: `Paged ${i}`, conditions: [] });
    await open(page, '/account');
    const articles = page.locator('#theses-list article.thesis');
    await page.locator('#theses-list button.more').waitFor({ timeout: 30_000 });
    assert.equal(await articles.count(), 50);
    assert.equal(await articles.first().locator('h3').textContent(), 'Paged 51 ETH long');
    await page.getByRole('button', { name: 'Show older theses' }).click();
    await page.waitForFunction(() => document.querySelectorAll('#theses-list article.thesis').length === 52);
    assert.equal(await page.locator('#theses-list button.more').count(), 0, 'the last page has no button');
    assert.equal(await articles.last().locator('h3').textContent(), 'Paged 0 ETH long');
    assert.equal(await page.evaluate(() => document.activeElement?.querySelector('h3')?.textContent), 'Paged 1 ETH long');
    // Every thesis once, newest first.
    const titles = await articles.locator('h3').allTextContents();
    assert.deepEqual(
      titles,
      Array.from({ length: 52 }, (_, i) => `Paged ${51 - i} ETH long`),
    );
    assert.deepEqual(errors, []);
  });

  test('an unknown asset page is a 404 that says the asset is not available and why', async () => {
    const other = await ctx.newPage();
    try {
      const res = await other.goto(`${base}/asset/xyz`);
      assert.equal(res?.status(), 404);
      await other.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
      assert.equal(await other.textContent('main h1'), 'Asset not available');
      assert.match((await other.textContent('main .error')) ?? '', /xyz/);
    } finally {
      await other.close();
    }
  });

  test('an asset page draws the candlestick chart (non-empty canvas) with signal markers', async () => {
    await open(page, '/asset/bitcoin');
    await page.waitForSelector('#chart[data-markers]', { timeout: 30_000 });
    const markers = Number(await page.getAttribute('#chart', 'data-markers'));
    assert.ok(markers >= 1, `markers: ${markers}`);
    assert.ok(Number(await page.getAttribute('#chart', 'data-candles')) >= 150);
    // Pixels the chart painted (not transparent and not the white background).
    const painted = await page.evaluate(() => {
      let n = 0;
      for (const c of document.querySelectorAll<HTMLCanvasElement>('#chart canvas')) {
        const ctx2d = c.getContext('2d');
        if (!ctx2d || c.width === 0 || c.height === 0) continue;
        const px = ctx2d.getImageData(0, 0, c.width, c.height).data;
        for (let i = 0; i < px.length; i += 4) if (px[i + 3]! > 0 && !(px[i]! > 245 && px[i + 1]! > 245 && px[i + 2]! > 245)) n++;
      }
      return n;
    });
    assert.ok(painted > 5000, `painted pixels: ${painted}`);
    // The factor bars add up to the score.
    const sum = await page.$$eval('#factors li', (lis) => lis.reduce((a, li) => a + Number((li as HTMLElement).dataset.contribution), 0));
    const score = await fetch(`${base}/app/data/signals/bitcoin`).then(
      async (r) => ((await r.json()) as { data: { score: number } }).data.score,
    );
    assert.ok(Math.abs(sum - score) < 1e-3, `sum ${sum} vs score ${score}`);
    // Why the level reads as it does: the API's level_rule explanation, shown as given.
    const why = await fetch(`${base}/app/data/signals/bitcoin`).then(
      async (r) => ((await r.json()) as { data: { level_rule: { explanation: string } } }).data.level_rule.explanation,
    );
    assert.match(why, /^Score -?[\d.]+ is in the /);
    assert.equal(await page.textContent('.why-level'), why);
    // Signed in on the free tier: the signal history explains the tier it needs.
    await page.waitForSelector('#history-tier');
    assert.match((await page.textContent('#history-tier')) ?? '', /pro or api tier/);
    assert.deepEqual(errors, []);
  });

  test('the chart window in view is a link marked aria-current="page", drawn bold like before; the others are plain links', async () => {
    await open(page, '/asset/bitcoin?days=90');
    const windows = page.locator('main p', { hasText: /^Window: / });
    const links = await windows.locator('a').evaluateAll((as) =>
      as.map((a) => ({
        text: a.textContent,
        href: a.getAttribute('href'),
        current: a.getAttribute('aria-current'),
        weight: getComputedStyle(a).fontWeight,
        underline: getComputedStyle(a).textDecorationLine,
      })),
    );
    assert.deepEqual(
      links.map((l) => [l.text, l.href, l.current]),
      [
        ['30 d', '?days=30', null],
        ['90 d', '?days=90', 'page'],
        ['180 d', '?days=180', null],
        ['365 d', '?days=365', null],
      ],
    );
    assert.equal(links[1]!.weight, '700');
    assert.equal(links[1]!.underline, 'none');
    assert.notEqual(links[0]!.underline, 'none');
    // Without ?days the default window, 180 days, is the current one.
    await open(page, '/asset/bitcoin');
    assert.equal(await page.getByRole('link', { name: '180 d' }).getAttribute('aria-current'), 'page');
  });

  test('the chart leaves days without a candle blank and names them, instead of closing the axis over them', async () => {
    // The bundled prices have no missing day: the answer is cut here, as a source's gap would be.
    const pattern = (u: URL) => u.pathname === '/app/data/prices/bitcoin';
    let dropped: string[] = [];
    await page.route(pattern, async (route) => {
      const res = await route.fetch();
      const body = (await res.json()) as { data: { candles: { date: string }[] } };
      dropped = [10, 11, 30].map((i) => body.data.candles[i]!.date);
      body.data.candles = body.data.candles.filter((c) => !dropped.includes(c.date));
      await route.fulfill({ response: res, json: body });
    });
    try {
      await open(page, '/asset/bitcoin?days=90');
      await page.waitForSelector('#chart[data-markers]', { timeout: 30_000 });
      assert.equal(await page.getAttribute('#chart', 'data-candles'), '87');
      assert.equal(await page.getAttribute('#chart', 'data-missing-days'), '3');
      assert.equal(
        await page.textContent('#chart-gaps'),
        `No data for 3 days (${dropped[0]} to ${dropped[1]}, ${dropped[2]}): left blank, not filled.`,
      );
    } finally {
      await page.unroute(pattern);
    }
    // Without a gap there is no such sentence.
    await open(page, '/asset/bitcoin?days=90');
    await page.waitForSelector('#chart[data-markers]', { timeout: 30_000 });
    assert.equal(await page.getAttribute('#chart', 'data-missing-days'), '0');
    assert.equal(await page.$('#chart-gaps'), null);
    assert.deepEqual(errors, []);
  });

  test('a funding rate that is not zero is not shown as 0.0000 %', async () => {
    // BTC's daily mean funding of 2025-04-22 (data/funding/btc_daily.csv), as GET /regime serves it that day.
    const pattern = (u: URL) => u.pathname === '/app/data/regime';
    await page.route(pattern, async (route) => {
      const res = await route.fetch();
      const body = (await res.json()) as { data: { conditions: { funding_rate: { value: number; annualized_pct: number } } } };
      body.data.conditions.funding_rate.value = -1.33333333333333e-7;
      body.data.conditions.funding_rate.annualized_pct = -0.01;
      await route.fulfill({ response: res, json: body });
    });
    try {
      await open(page, '/');
      const text = (await page.textContent('main')) ?? '';
      assert.match(text, /-0\.000013% per 8 h \(-0\.01% a year\)/);
      assert.doesNotMatch(text, /0\.0000% per 8 h/);
    } finally {
      await page.unroute(pattern);
    }
    // Ordinary rates keep their 4 decimals.
    await open(page, '/');
    assert.match((await page.textContent('main')) ?? '', /0\.0036% per 8 h \(4% a year\)/);
    assert.deepEqual(errors, []);
  });

  test('an asset with a chain shows its chain health; the chains page shows stale or missing metrics as such', async () => {
    await open(page, '/asset/ethereum');
    await page.waitForSelector('#h-chain-health-ethereum');
    await open(page, '/chains');
    const text = (await page.textContent('main')) ?? '';
    for (const chain of ['Ethereum', 'Solana', 'Hyperliquid']) assert.match(text, new RegExp(chain));
    assert.match(text, /Raw metrics with 7-day change/);
    // Solana has no metric with current data at 2025-09-30: its components table says so.
    assert.match(text, /None: no metric has current data, so there is no score/);
    // A screen reader's list of regions tells the six tables apart: each is named by its chain and heading.
    const regions = await page
      .getByRole('region')
      .evaluateAll((els) =>
        els.filter((e) => e.classList.contains('table-wrap')).map((e) => e.getAttribute('aria-label') ?? e.getAttribute('aria-labelledby')),
      );
    const names = await Promise.all(
      regions.map((ids) =>
        page.evaluate(
          (ids) =>
            ids!
              .split(' ')
              .map((id) => document.getElementById(id)?.textContent ?? `#${id}?`)
              .join(' '),
          ids,
        ),
      ),
    );
    assert.deepEqual(names, [
      'Ethereum (eth) Components (z-scores over 90 days)',
      'Ethereum (eth) Raw metrics with 7-day change',
      'Solana (sol) Components (z-scores over 90 days)',
      'Solana (sol) Raw metrics with 7-day change',
      'Hyperliquid (hype) Components (z-scores over 90 days)',
      'Hyperliquid (hype) Raw metrics with 7-day change',
    ]);
    assert.deepEqual(errors, []);
  });
});

describe('dashboard: data age, double submits, network failures', { skip: SKIP }, () => {
  let ctx: BrowserContext;
  let page: Page;
  let errors: string[];

  before(async () => {
    if (SKIP) return;
    ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await ctx.newPage();
    errors = watchErrors(page);
    // Its own account on the api tier: these steps make more requests than the free tier's 10 a minute.
    await signUp(page, 'age-and-network@example.com');
    assert.equal(await svc.keys.setTier('age-and-network@example.com', 'api'), 1);
  });
  after(() => ctx?.close());

  test('on the api tier the asset page lists the signal history, each change with the rule that set its level, its sentence opened by keyboard or tap', async () => {
    await open(page, '/asset/ripple');
    await page.waitForSelector('table#history tbody tr');
    assert.equal(await page.textContent('table#history thead th:last-child'), 'Why');
    const rows = await page.$$eval('table#history tbody tr', (trs) =>
      (trs as HTMLTableRowElement[]).map((tr) => ({
        day: tr.cells[0]!.textContent,
        label: tr.cells[6]!.querySelector('summary')?.textContent ?? null,
        sentence: tr.cells[6]!.querySelector('details > p')?.textContent ?? null,
        title: tr.cells[6]!.getAttribute('title'),
      })),
    );
    // Every change has its rule, named in words, and its sentence in the page (not in a title).
    assert.ok(rows.length > 5);
    for (const r of rows) {
      assert.ok(['Band', 'Hysteresis', 'Confirmation', 'Volatility gate'].includes(r.label ?? ''), `${r.day}: ${r.label}`);
      assert.match(r.sentence ?? '', /^Score -?[\d.]+ is in the /, r.day!);
      assert.equal(r.title, null);
    }
    const i = rows.findIndex((r) => r.day === '2024-12-09');
    assert.ok(i >= 0, JSON.stringify(rows.map((r) => r.day)));
    assert.equal(rows[i]!.label, 'Volatility gate');
    assert.match(rows[i]!.sentence!, /but buys are held at neutral while the 90-day downside semideviation/);
    // Closed at first; the keyboard opens it (Tab to the summary, Enter), and a tap does too.
    const cell = page.locator('table#history tbody tr').nth(i).locator('td').nth(6);
    assert.equal(await cell.locator('details > p').isVisible(), false);
    await cell.locator('summary').focus();
    await page.keyboard.press('Enter');
    await cell.locator('details > p').waitFor({ state: 'visible' });
    assert.equal(await cell.locator('details').getAttribute('open'), '');
    const other = page
      .locator('table#history tbody tr')
      .nth(i === 0 ? 1 : 0)
      .locator('td')
      .nth(6);
    await other.locator('summary').click();
    await other.locator('details > p').waitFor({ state: 'visible' });
    assert.deepEqual(errors, []);
  });

  test("offline, every page says the figures are the bundled dataset's, with its last day and age", async () => {
    for (const path of ['/', '/asset/bitcoin', '/chains', '/track-record', '/account']) {
      await open(page, path);
      const today = new Date().toISOString().slice(0, 10);
      const age = Math.round((Date.parse(today) - Date.parse(svc.market.asOf)) / 86_400_000);
      assert.equal(
        await page.textContent('#data-note'),
        `Offline mode: every figure here comes from the bundled historical dataset, which ends on ${svc.market.asOf}, ${age} days before today (${today} UTC). These are not live prices or signals.`,
        path,
      );
      assert.match((await page.textContent('footer')) ?? '', /bundled historical dataset \(offline mode, data to \d{4}-\d{2}-\d{2}\)/);
      // In a landmark of its own, which a screen reader's list of landmarks reaches (axe, below: `region`).
      assert.match((await page.getByRole('complementary', { name: 'Data source' }).textContent()) ?? '', /^Offline mode: /, path);
    }
  });

  test('a thesis the API refuses names the field by its label and marks that input invalid', async () => {
    await open(page, '/account');
    await page.selectOption('#t-asset', 'bitcoin');
    await page.selectOption('#t-direction', 'long');
    await page.fill('#t-title', 'stop already hit');
    // A long's stop above the current price: the service refuses it (stop_price), not the browser.
    const now = svc.market.signal('bitcoin', false).value;
    await page.fill('#t-stop', String(Math.ceil(now.price_usd * 2)));
    await page.click('#create-thesis');
    await page.locator('#thesis-form .msg.error').waitFor({ timeout: 30_000 });
    const msg = (await page.textContent('#thesis-form .msg')) ?? '';
    assert.match(msg, /^Stop price: \d+ is at or above BTC's current price .* give a stop price below /);
    assert.doesNotMatch(msg, /Invalid body field|stop_price/);
    assert.equal(await page.getAttribute('#t-stop', 'aria-invalid'), 'true');
    // The input is described by the message, which is there when the input takes the focus.
    assert.equal(await page.getAttribute('#t-stop', 'aria-describedby'), 'thesis-msg');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 't-stop');
    // Edited: the mark and the message, which spoke of the old value, go at once.
    await page.fill('#t-stop', String(Math.floor(now.price_usd / 2)));
    assert.equal(await page.getAttribute('#t-stop', 'aria-invalid'), null);
    assert.equal(await page.textContent('#thesis-form .msg'), '');
    assert.equal(await page.getAttribute('#t-stop', 'aria-describedby'), null);
    // A condition's field is named by its row and its own label.
    await page.click('#add-condition');
    const cond = page.locator('#conditions .cond').first();
    await cond.locator('.c-metric').selectOption('price_usd');
    await cond.locator('.c-op').selectOption('gt');
    await cond.locator('.c-value').fill('1e13');
    await page.click('#create-thesis');
    await page.waitForFunction(() => /^Condition 1/.test(document.querySelector('#thesis-form .msg')?.textContent ?? ''));
    assert.match(
      (await page.textContent('#thesis-form .msg')) ?? '',
      /^Condition 1, value: must be at most 1e12 for metric 'price_usd' \(USD, the cap of every thesis price\), got 1e13: give a price at most 1e12$/,
    );
    assert.equal(await cond.locator('.c-value').getAttribute('aria-invalid'), 'true');
    assert.equal(await cond.locator('.c-value').getAttribute('aria-describedby'), 'thesis-msg');
    assert.equal(await page.evaluate(() => document.activeElement?.classList.contains('c-value')), true);
    // Edited: a condition's mark and the message go too.
    await cond.locator('.c-value').fill('1');
    assert.equal(await cond.locator('.c-value').getAttribute('aria-invalid'), null);
    assert.equal(await cond.locator('.c-value').getAttribute('aria-describedby'), null);
    assert.equal(await page.textContent('#thesis-form .msg'), '');
    // A refused operator (conditions.0.operator) marks the row's operator: a second row's
    // refused value is named by its own row.
    await cond.locator('.c-metric').selectOption('signal');
    await cond.locator('.c-op').selectOption('lt');
    await cond.locator('.c-value').fill('strong_sell');
    await page.click('#create-thesis');
    await page.waitForFunction(() => /^Condition 1, operator/.test(document.querySelector('#thesis-form .msg')?.textContent ?? ''));
    assert.match((await page.textContent('#thesis-form .msg')) ?? '', /^Condition 1, operator: signal lt strong_sell would never hold/);
    assert.equal(await cond.locator('.c-op').getAttribute('aria-invalid'), 'true');
    assert.equal(await cond.locator('.c-op').getAttribute('aria-describedby'), 'thesis-msg');
    assert.equal(await page.evaluate(() => document.activeElement?.classList.contains('c-op')), true);
    await cond.locator('.c-op').selectOption('eq');
    assert.equal(await cond.locator('.c-op').getAttribute('aria-invalid'), null);
    assert.equal(await page.textContent('#thesis-form .msg'), '');
    await page.click('#add-condition');
    const second = page.locator('#conditions .cond').nth(1);
    await second.locator('.c-metric').selectOption('price_usd');
    await second.locator('.c-value').fill('1e13');
    await page.click('#create-thesis');
    await page.waitForFunction(() => /^Condition 2/.test(document.querySelector('#thesis-form .msg')?.textContent ?? ''));
    assert.match((await page.textContent('#thesis-form .msg')) ?? '', /^Condition 2, value: must be at most 1e12/);
    assert.equal(await second.locator('.c-value').getAttribute('aria-invalid'), 'true');
    assert.equal(await cond.locator('.c-value').getAttribute('aria-invalid'), null, "the first row's value is not marked");
    await second.getByRole('button', { name: 'Remove' }).click();
    // Corrected and sent again: the thesis is stored, no mark is left.
    await cond.locator('.c-metric').selectOption('price_usd');
    await cond.locator('.c-op').selectOption('gt');
    await cond.locator('.c-value').fill('1');
    await page.click('#create-thesis');
    const mine = page.locator('#theses-list article.thesis', { hasText: 'stop already hit' });
    await mine.waitFor({ timeout: 30_000 });
    assert.equal(await page.locator('#thesis-form [aria-invalid]').count(), 0);
    await mine.getByRole('button', { name: /Delete thesis/ }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete thesis' }).click();
    await mine.waitFor({ state: 'detached' });
    // The four refused POSTs are the ones this test sent; nothing else failed.
    assert.deepEqual(errors, Array(4).fill(`400 ${base}/api/v1/thesis`));
    errors.splice(0); // this suite's later tests share the list
  });

  test('a double click on "Create thesis" creates one; a sub-cent price is shown with its digits, not as $0.0000', async () => {
    await open(page, '/account');
    await page.selectOption('#t-asset', 'dogecoin');
    await page.selectOption('#t-direction', 'long');
    await page.fill('#t-title', 'one thesis per click');
    await page.fill('#t-entry', '0.00001234');
    await page.fill('#t-target', '0.00005');
    await page.fill('#t-stop', '0.000001');
    await page.dblclick('#create-thesis');
    await page.waitForFunction(
      () => document.querySelector('#create-thesis') && !(document.querySelector('#create-thesis') as HTMLButtonElement).disabled,
    );
    await page.locator('#theses-list article.thesis').first().waitFor({ timeout: 30_000 });
    const mine = page.locator('#theses-list article.thesis', { hasText: 'one thesis per click' });
    assert.equal(await mine.count(), 1);
    assert.match((await mine.textContent()) ?? '', /Entry \$0\.00001234 · target \$0\.00005 · stop \$0\.000001/);
    await mine.getByRole('button', { name: /Delete thesis/ }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete thesis' }).click();
    await mine.waitFor({ state: 'detached' });
    assert.deepEqual(errors, []);
  });

  test('a long key name wraps: the Revoke button stays on screen', async () => {
    await open(page, '/account');
    const name = 'a-very-long-key-name-for-the-nightly-research-cluster-job-runner-x'.slice(0, 64);
    await page.fill('#key-name', name);
    await page.click('#generate');
    await page.waitForSelector('dialog[open]', { timeout: 30_000 });
    await page.keyboard.press('Escape');
    const row = page.locator('#keys tbody tr', { hasText: name });
    await row.waitFor();
    const box = await row.getByRole('button', { name: /Revoke key/ }).boundingBox();
    assert.ok(box && box.x + box.width <= 1280, `Revoke at ${JSON.stringify(box)}`);
    await row.getByRole('button', { name: /Revoke key/ }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke key' }).click();
    await page.locator('#keys tbody tr', { hasText: name }).locator('.status', { hasText: 'revoked' }).waitFor();
  });

  test('a session that ended while the account page was open shows the sign-in form with a notice, not "Signed in as"', async () => {
    const ctx2 = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const p = await ctx2.newPage();
      const errs = watchErrors(p);
      await signUp(p, 'session-ends@example.com');
      await open(p, '/account');
      assert.ok(await p.isVisible('#who'));
      // The session ends elsewhere (signed out in another tab: the cookie is gone), and the
      // service refuses the page's JWT (as when it expires).
      await p.evaluate(() => fetch('/auth/sign-out', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }));
      await p.route(`${base}/api/v1/**`, (r) =>
        r.fulfill({
          status: 401,
          contentType: 'application/json',
          body: JSON.stringify({ status: 'error', data: null, error: { code: 'UNAUTHORIZED', message: 'Invalid or expired token' } }),
        }),
      );
      await p.fill('#key-name', 'after the end');
      await p.click('#generate');
      await p.waitForSelector('#signin-form');
      assert.equal(await p.isVisible('#who'), false, 'no "Signed in as" over a form that cannot work');
      assert.match((await p.textContent('#signin-msg')) ?? '', /Your session has ended \(signed out, or expired\): sign in again\./);
      assert.deepEqual(
        errs.filter((e) => !/401/.test(e)),
        [],
      );
    } finally {
      await ctx2.close();
    }
  });

  test('with the service out of reach, account actions say so and their forms stay usable', async () => {
    await open(page, '/account');
    // The network fails for everything the page asks (the request never reaches the service).
    await page.route(`${base}/**`, (r) => r.abort('internetdisconnected'));
    try {
      await page.fill('#key-name', 'cut');
      await page.click('#generate');
      const network = /could not be reached \(network error\), so nothing was changed/;
      await page.waitForFunction(() => /network error/.test(document.querySelector('#key-form ~ .msg')?.textContent ?? ''));
      assert.match((await page.textContent('#key-form ~ .msg')) ?? '', network);
      assert.equal(await page.isDisabled('#generate'), false, 'the button is usable again');
      await page.click('#signout');
      await page.waitForFunction(() => /network error/.test(document.querySelector('#signout-msg')?.textContent ?? ''));
      assert.ok(await page.isVisible('#who'), 'still signed in, and the page says why');
    } finally {
      await page.unroute(`${base}/**`);
    }
    // Back online: the same form works.
    await page.click('#generate');
    await page.waitForSelector('dialog[open]', { timeout: 30_000 });
    await page.keyboard.press('Escape');
    // The failed fetches were answered on the page, none escaped as page errors (the aborted
    // requests themselves are logged by the browser as failed loads, not counted).
    assert.deepEqual(
      errors.filter((e) => !/ERR_INTERNET_DISCONNECTED/.test(e)),
      [],
    );
  });
});

describe('a browser whose clock is off', { skip: SKIP }, () => {
  test("the offline note's today is the server's UTC day, not the browser's (a clock one day behind)", async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 }, timezoneId: 'Pacific/Kiritimati' });
    try {
      const page = await ctx.newPage();
      await page.clock.install({ time: Date.now() - 86_400_000 });
      await open(page, '/');
      const today = new Date().toISOString().slice(0, 10);
      const age = Math.round((Date.parse(today) - Date.parse(svc.market.asOf)) / 86_400_000);
      assert.equal(
        await page.textContent('#data-note'),
        `Offline mode: every figure here comes from the bundled historical dataset, which ends on ${svc.market.asOf}, ${age} days before today (${today} UTC). These are not live prices or signals.`,
      );
    } finally {
      await ctx.close();
    }
  });

  test('the JWT is kept for its lifetime from when it came, whatever the browser clock says (one hour ahead)', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const page = await ctx.newPage();
      await page.clock.install({ time: Date.now() + 3_600_000 });
      await signUp(page, `clock-${Date.now()}@example.com`);
      let tokens = 0;
      page.on('request', (r) => {
        if (new URL(r.url()).pathname === '/auth/token') tokens++;
      });
      for (let i = 0; i < 3; i++) {
        const listed = page.waitForResponse((r) => new URL(r.url()).pathname === '/api/v1/keys');
        await page.click('#refresh-keys');
        assert.equal((await listed).status(), 200);
      }
      assert.equal(tokens, 0, 'the JWT fetched at sign-in is used again, not fetched for every call');
    } finally {
      await ctx.close();
    }
  });
});

describe('a slow or failing service', { skip: SKIP }, () => {
  test('data that does not come within 30 s ends "Loading..." with a message that says so and a way to try again', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const page = await ctx.newPage();
      await page.clock.install();
      // The regime never answers (a stalled proxy or database): the browser alone would wait minutes.
      await page.route('**/app/data/regime', () => {});
      const asked = page.waitForRequest((r) => new URL(r.url()).pathname === '/app/data/regime');
      await page.goto(`${base}/`);
      await asked;
      assert.equal(await page.getAttribute('main', 'aria-busy'), 'true', 'a screen reader hears the page is loading');
      await page.clock.fastForward(31_000);
      await page.waitForSelector('body[data-ready="true"]', { timeout: 10_000 });
      assert.equal(await page.textContent('main h1'), 'Something went wrong');
      assert.equal(await page.textContent('main .error'), 'The service did not answer within 30 seconds: try again in a moment.');
      assert.equal(await page.getByRole('link', { name: 'Try again' }).getAttribute('href'), `${base}/`);
      assert.equal(await page.getAttribute('main', 'aria-busy'), null);
    } finally {
      await ctx.close();
    }
  });

  test('an account action with no answer within 30 s says it may or may not have been applied and enables its button again', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const page = await ctx.newPage();
      await page.clock.install();
      await signUp(page, `stalled.${Date.now()}@example.com`);
      await page.waitForSelector('#tier');
      await page.fill('#key-name', 'kept');
      await page.click('#generate');
      await page.locator('#new-key-dialog').getByRole('button', { name: 'Close' }).click();
      await page.waitForSelector('#keys tr .revoke');
      const NO_ANSWER =
        'No answer from the service within 30 seconds: the request may or may not have been applied. Refresh the list to see whether it was.';

      // "Generate key": the request stalls (a proxy or database that never answers).
      await page.route('**/api/v1/keys/create', () => {});
      await page.fill('#key-name', 'stalled');
      let asked = page.waitForRequest((r) => new URL(r.url()).pathname === '/api/v1/keys/create');
      await page.click('#generate');
      await asked;
      assert.equal(await page.isDisabled('#generate'), true);
      await page.clock.fastForward(31_000);
      await page.waitForFunction(() => /No answer/.test(document.querySelector('#key-msg')?.textContent ?? ''));
      assert.equal(await page.textContent('#key-msg'), NO_ANSWER);
      assert.equal(await page.isDisabled('#generate'), false);

      // "Revoke", after its confirmation.
      await page.route('**/api/v1/keys/revoke', () => {});
      await page.locator('#keys tr .revoke').first().click();
      asked = page.waitForRequest((r) => new URL(r.url()).pathname === '/api/v1/keys/revoke');
      await page.getByRole('dialog').getByRole('button', { name: 'Revoke key' }).click();
      await asked;
      await page.evaluate(() => (document.querySelector('#key-msg')!.textContent = ''));
      await page.clock.fastForward(31_000);
      await page.waitForFunction(() => /No answer/.test(document.querySelector('#key-msg')?.textContent ?? ''));
      assert.equal(await page.textContent('#key-msg'), NO_ANSWER);

      // Refreshing the list, as the message says, shows what happened (here: nothing reached the service).
      await page.unrouteAll();
      await page.click('#refresh-keys');
      await page.waitForFunction(() => !/No answer/.test(document.querySelector('#key-msg')?.textContent ?? 'No answer'));
      assert.equal(await page.locator('#keys tbody tr').count(), 1);
      assert.equal(await page.textContent('#keys tbody tr .status'), 'active');
    } finally {
      await ctx.close();
    }
  });

  test('sign-in and sign-out with no answer within 30 s say so instead of "Working..." for as long as the browser waits', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const page = await ctx.newPage();
      await page.clock.install();
      const email = `stalled-signin.${Date.now()}@example.com`;
      await signUp(page, email);
      await page.route('**/auth/sign-out', () => {});
      let asked = page.waitForRequest((r) => new URL(r.url()).pathname === '/auth/sign-out');
      await page.click('#signout');
      await asked;
      await page.clock.fastForward(31_000);
      await page.waitForFunction(() => /No answer/.test(document.querySelector('#signout-msg')?.textContent ?? ''));
      assert.equal(
        await page.textContent('#signout-msg'),
        'No answer from the service within 30 seconds: you may still be signed in; try again.',
      );
      await page.unrouteAll();
      await page.click('#signout');
      await page.waitForSelector('#signin-msg');

      await page.route('**/auth/sign-in/email', () => {});
      await page.fill('#email', email);
      await page.fill('#password', PASSWORD);
      asked = page.waitForRequest((r) => new URL(r.url()).pathname === '/auth/sign-in/email');
      await page.click('button[type="submit"]');
      await asked;
      assert.equal(await page.textContent('#signin-msg'), 'Working...');
      await page.clock.fastForward(31_000);
      await page.waitForFunction(() => /No answer/.test(document.querySelector('#signin-msg')?.textContent ?? ''));
      assert.equal(await page.textContent('#signin-msg'), 'No answer from the service within 30 seconds: try again in a moment.');
    } finally {
      await ctx.close();
    }
  });

  test('without JavaScript the page says it needs it and where the same figures are, instead of only "Loading..."', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 }, javaScriptEnabled: false });
    try {
      const page = await ctx.newPage();
      await page.goto(`${base}/`);
      assert.match((await page.textContent('main')) ?? '', /This dashboard needs JavaScript\. The same figures are in the API/);
      assert.equal(await page.getByRole('link', { name: '/api/v1/signals' }).getAttribute('href'), '/api/v1/signals');
    } finally {
      await ctx.close();
    }
  });

  test('when app.js does not load (404) or fails, "Loading..." is followed after a few seconds by where the figures are in the API', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const page = await ctx.newPage();
      const fallback = page.locator('#load-fallback');
      for (const broken of [
        { status: 404, contentType: 'text/plain', body: 'Not found' },
        { status: 200, contentType: 'text/javascript', body: 'throw new Error("broken build");' },
      ]) {
        await page.route('**/app/static/app.js', (r) => r.fulfill(broken));
        await page.goto(`${base}/`);
        assert.equal(await fallback.isVisible(), false, 'not at once: the script may still be on its way');
        await fallback.waitFor({ state: 'visible', timeout: 15_000 });
        assert.match(
          (await fallback.textContent()) ?? '',
          /script may have failed to load: reload to try again\. The same figures are in the API/,
        );
        for (const path of ['/api/v1/signals', '/api/v1/status']) {
          assert.equal(await page.getByRole('link', { name: path }).getAttribute('href'), path);
        }
        await page.unrouteAll();
      }
      // When app.js runs, the fallback is gone at once, also while the data is still loading.
      await page.route('**/app/data/regime', () => {});
      await page.goto(`${base}/`);
      await page.waitForFunction(() => document.querySelector('main')?.getAttribute('aria-busy') === 'true');
      assert.equal(await fallback.count(), 0);
      // Without JavaScript only the <noscript> text says it (test above), not this one too.
      const noJs = await browser.newContext({ javaScriptEnabled: false });
      try {
        const p = await noJs.newPage();
        await p.goto(`${base}/`);
        assert.equal(await p.locator('#load-fallback').isVisible(), false);
        await p.waitForTimeout(9_000);
        assert.equal(await p.locator('#load-fallback').isVisible(), false);
      } finally {
        await noJs.close();
      }
    } finally {
      await ctx.close();
    }
  });

  test("a 503 that is not the API's JSON (a proxy's page) is said in words, with Try again and the way back", async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const page = await ctx.newPage();
      await page.route('**/app/data/**', (r) =>
        r.fulfill({ status: 503, contentType: 'text/html', body: '<h1>503 Service Unavailable</h1>' }),
      );
      await open(page, '/asset/bitcoin');
      assert.equal(await page.textContent('main .error'), 'The service is unavailable (HTTP 503): try again in a moment.');
      assert.equal(await page.getByRole('link', { name: 'Try again' }).getAttribute('href'), `${base}/asset/bitcoin`);
      assert.equal(await page.getByRole('link', { name: 'Back to the overview' }).count(), 1);
    } finally {
      await ctx.close();
    }
  });
});

describe('dashboard: where the keyboard focus goes after an account action', { skip: SKIP }, () => {
  let ctx: BrowserContext;
  let page: Page;
  const focused = () => page.evaluate(() => `${document.activeElement?.tagName}#${document.activeElement?.id ?? ''}`);

  before(async () => {
    if (SKIP) return;
    ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await ctx.newPage();
    // On the api tier: these steps make more thesis requests than the free tier's 10 a minute.
    await signUp(page, 'focus-after-actions@example.com');
    assert.equal(await svc.keys.setTier('focus-after-actions@example.com', 'api'), 1);
  });
  after(() => ctx?.close());

  test('"Generate key" and "Create thesis" pressed from the keyboard keep the focus when the answer comes (it is not dropped to the page)', async () => {
    await open(page, '/account');
    await page.waitForSelector('#theses-list p, #theses-list article');
    // A refusal that names no input (the service out of reach): the focus stays on the button.
    await page.route(`${base}/api/v1/keys/create`, (r) => r.abort('internetdisconnected'));
    await page.fill('#key-name', 'offline');
    await page.focus('#generate');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => /network error/.test(document.querySelector('#key-form ~ .msg')?.textContent ?? ''));
    assert.equal(await focused(), 'BUTTON#generate');
    await page.unroute(`${base}/api/v1/keys/create`);

    await page.route(`${base}/api/v1/thesis`, (r) => r.abort('internetdisconnected'));
    await page.fill('#t-title', 'focus stays');
    await page.focus('#create-thesis');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => /network error/.test(document.querySelector('#thesis-msg')?.textContent ?? ''));
    assert.equal(await focused(), 'BUTTON#create-thesis');
    await page.unroute(`${base}/api/v1/thesis`);

    // Created: the focus is still on the button, the next Tab goes on from there.
    await page.focus('#create-thesis');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelector('#thesis-msg')?.textContent === 'Thesis created.');
    await page.locator('#theses-list article.thesis', { hasText: 'focus stays' }).waitFor();
    assert.equal(await focused(), 'BUTTON#create-thesis');
  });

  test('"Refresh usage" after a network error shows the list and no longer the error', async () => {
    await open(page, '/account');
    await page.waitForSelector('#tier');
    await page.route(`${base}/api/v1/keys`, (r) => r.abort('internetdisconnected'));
    await page.click('#refresh-keys');
    await page.waitForFunction(() => /network error/.test(document.querySelector('#key-form ~ .msg')?.textContent ?? ''));
    await page.unroute(`${base}/api/v1/keys`);
    const answered = page.waitForResponse((r) => new URL(r.url()).pathname === '/api/v1/keys' && r.ok());
    await page.click('#refresh-keys');
    await answered;
    await page.waitForFunction(() => !/network error/.test(document.querySelector('#key-form ~ .msg')?.textContent ?? ''), undefined, {
      timeout: 5_000,
    });
  });

  test('when the list cannot be read again after a create or a delete (429), the theses listed stay and the message says why', async () => {
    await open(page, '/account');
    await page.fill('#t-title', 'listed before the 429');
    await page.click('#create-thesis');
    const before = page.locator('#theses-list article.thesis', { hasText: 'listed before the 429' });
    await before.waitFor();
    // The tier's minute quota runs out for the list (as a free user's 10 a minute do after a few creates).
    const rateLimited = { status: 'error', data: null, error: { code: 'RATE_LIMITED', message: 'Rate limit exceeded: retry in 57 s' } };
    await page.route(
      (u) => u.pathname === '/api/v1/thesis' && u.search.includes('include_health'),
      (r) =>
        r.fulfill({ status: 429, contentType: 'application/json', headers: { 'retry-after': '57' }, body: JSON.stringify(rateLimited) }),
    );
    try {
      await page.fill('#t-title', 'created during the 429');
      await page.click('#create-thesis');
      await page.waitForFunction(() => /could not be refreshed/.test(document.querySelector('#thesis-msg')?.textContent ?? ''));
      assert.equal(
        await page.textContent('#thesis-msg'),
        'Thesis created, but the list could not be refreshed: Rate limit exceeded: retry in 57 s',
      );
      assert.equal(await before.count(), 1, 'the theses listed are still there');

      await before.getByRole('button', { name: /Delete thesis/ }).click();
      await page.getByRole('dialog').getByRole('button', { name: 'Delete thesis' }).click();
      await page.waitForFunction(() => /deleted, but/.test(document.querySelector('#thesis-msg')?.textContent ?? ''));
      assert.equal(await before.count(), 0, 'the deleted thesis is gone from the list');
    } finally {
      await page.unroute((u) => u.pathname === '/api/v1/thesis' && u.search.includes('include_health'));
    }
  });

  test('a key name the API refuses (only spaces) is said by the label "Key name", the input marked invalid and focused', async () => {
    await open(page, '/account');
    await page.waitForSelector('#tier');
    await page.fill('#key-name', '   ');
    await page.focus('#generate');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => /empty/.test(document.querySelector('#key-form ~ .msg')?.textContent ?? ''));
    assert.equal(await page.textContent('#key-form ~ .msg'), 'Key name: must not be empty');
    assert.equal(await page.getAttribute('#key-name', 'aria-invalid'), 'true');
    assert.equal(await focused(), 'INPUT#key-name');
    await page.keyboard.type('laptop');
    assert.equal(await page.getAttribute('#key-name', 'aria-invalid'), null);
  });

  test('thesis conditions from the keyboard: each is a group named "Condition N"; Add focuses the new one, Remove moves on to the next, not to the page', async () => {
    await open(page, '/account');
    await page.waitForSelector('#thesis-form');
    const state = () =>
      page.evaluate(() => {
        const el = document.activeElement as HTMLElement;
        const row = el.closest('.cond');
        return {
          focus: row ? `${row.getAttribute('aria-label')} ${el.getAttribute('aria-label')}` : `${el.tagName}#${el.id}`,
          groups: [...document.querySelectorAll('#conditions .cond')].map(
            (r) => `${r.getAttribute('role')} ${r.getAttribute('aria-label')}`,
          ),
          removes: [...document.querySelectorAll('#conditions .cond button')].map((b) => b.getAttribute('aria-label')),
        };
      });
    await page.focus('#add-condition');
    for (let i = 0; i < 3; i++) {
      await page.keyboard.press('Enter');
      // The new condition's first control has the focus: Enter again would choose a metric, not add another.
      if (i < 2) await page.focus('#add-condition');
    }
    assert.deepEqual(await state(), {
      focus: 'Condition 3 Metric',
      groups: ['group Condition 1', 'group Condition 2', 'group Condition 3'],
      removes: ['Remove condition 1', 'Remove condition 2', 'Remove condition 3'],
    });
    // Remove the second with the keyboard: the one after it (now the second) takes the focus.
    await page.getByRole('button', { name: 'Remove condition 2' }).focus();
    await page.keyboard.press('Enter');
    assert.deepEqual(await state(), {
      focus: 'Condition 2 Metric',
      groups: ['group Condition 1', 'group Condition 2'],
      removes: ['Remove condition 1', 'Remove condition 2'],
    });
    // The last one: the one before it; none left: "Add condition".
    await page.getByRole('button', { name: 'Remove condition 2' }).focus();
    await page.keyboard.press('Space');
    assert.equal((await state()).focus, 'Condition 1 Metric');
    await page.getByRole('button', { name: 'Remove condition 1' }).focus();
    await page.keyboard.press('Enter');
    assert.deepEqual(await state(), { focus: 'BUTTON#add-condition', groups: [], removes: [] });
  });
});

describe('the sign-in form', { skip: SKIP }, () => {
  test("a display name up to the service's 100 characters is taken whole, not cut at 64", async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const page = await ctx.newPage();
      await open(page, '/account');
      const name = 'Ada Lovelace, Countess of Lovelace, first programmer, Analytical Engine notes, 1843'; // 84
      await page.fill('#email', 'long-display-name@example.com');
      await page.fill('#password', PASSWORD);
      await page.fill('#name', name);
      assert.equal(await page.inputValue('#name'), name);
      await page.click('#signup');
      await page.waitForSelector('#who', { timeout: 30_000 });
      const stored = await page.evaluate(async () => (await (await fetch('/auth/get-session')).json()).user.name);
      assert.equal(stored, name);
    } finally {
      await ctx.close();
    }
  });

  test("the password is a new one for Create account, the account's own again for Sign in", async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const page = await ctx.newPage();
      await open(page, '/account');
      assert.equal(await page.getAttribute('#password', 'autocomplete'), 'current-password');
      // Nothing reaches the service: each attempt ends in the network error.
      await page.route(`${base}/auth/**`, (r) => r.abort('internetdisconnected'));
      await page.fill('#email', 'autocomplete@example.com');
      await page.fill('#password', PASSWORD);
      const attempt = async (button: string) => {
        await page.click(button);
        await page.waitForFunction(() => /could not be reached/.test(document.querySelector('#signin-msg')?.textContent ?? ''));
        await page.evaluate(() => (document.querySelector('#signin-msg')!.textContent = ''));
      };
      await attempt('#signup');
      assert.equal(await page.getAttribute('#password', 'autocomplete'), 'new-password');
      // A Create account that did not go through, then Sign in: the account's own password again.
      await attempt('#signin-form button[type=submit]');
      assert.equal(await page.getAttribute('#password', 'autocomplete'), 'current-password');
    } finally {
      await ctx.close();
    }
  });

  test('signing in with the service out of reach says so in the words of the other account actions', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const page = await ctx.newPage();
      await open(page, '/account');
      await page.route(`${base}/auth/**`, (r) => r.abort('internetdisconnected'));
      await page.fill('#email', 'offline-sign-in@example.com');
      await page.fill('#password', PASSWORD);
      await page.click('#signin-form button[type=submit]');
      await page.waitForFunction(() => !/Working/.test(document.querySelector('#signin-msg')?.textContent ?? 'Working'));
      assert.match((await page.textContent('#signin-msg')) ?? '', /could not be reached \(network error\), so nothing was changed/);
    } finally {
      await ctx.close();
    }
  });
});

describe('phone width', { skip: SKIP }, () => {
  test('the overview at 390 px has no horizontal scroll', async () => {
    const ctx = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 1, isMobile: true, hasTouch: true });
    try {
      const page = await ctx.newPage();
      await open(page, '/');
      await page.waitForSelector('#signals tbody tr');
      const { scrollWidth, clientWidth } = await page.evaluate(() => ({
        scrollWidth: document.documentElement.scrollWidth,
        clientWidth: document.documentElement.clientWidth,
      }));
      assert.ok(scrollWidth <= clientWidth, `scrollWidth ${scrollWidth} > clientWidth ${clientWidth}`);
      assert.equal(await page.locator('#signals tbody tr').count(), 11);
      // The "data as of" column is hidden on a phone: a stale row is marked beside its ticker.
      const staleRows = await page.$$eval('#signals tbody tr', (trs) =>
        trs
          .filter((tr) => (tr.querySelector('td:first-child .stale') as HTMLElement | null)?.offsetParent)
          .map((tr) => (tr as HTMLElement).dataset.asset),
      );
      assert.ok(staleRows.includes('ethereum'), `stale rows shown on the phone: ${staleRows.join(', ')}`);
      // The signals table fits its box: the last visible column (7 d) is not cut.
      const fit = await page.$eval('#signals', (t) => [t.scrollWidth, t.parentElement!.clientWidth]);
      assert.ok(fit[0]! <= fit[1]!, `table ${fit[0]} px in a ${fit[1]} px box`);
    } finally {
      await ctx.close();
    }
  });

  test("the API keys at 390 px: each key's usage and its Revoke button are on screen, not behind a sideways scroll", async () => {
    const ctx = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 1, isMobile: true, hasTouch: true });
    try {
      const page = await ctx.newPage();
      await signUp(page, 'keys-on-a-phone@example.com');
      await page.fill('#key-name', 'phone');
      await page.tap('#generate');
      await page.waitForSelector('dialog[open]', { timeout: 30_000 });
      await page.keyboard.press('Escape');
      const row = page.locator('#keys tbody tr', { hasText: 'phone' });
      await row.waitFor();
      // The table fits its box (nothing to scroll to), and every cell of the row is within the screen.
      const fit = await page.$eval('#keys', (t) => [t.scrollWidth, t.parentElement!.clientWidth]);
      assert.ok(fit[0]! <= fit[1]!, `keys table ${fit[0]} px in a ${fit[1]} px box`);
      for (const cell of await row.locator('td').all()) {
        const box = await cell.boundingBox();
        assert.ok(box && box.x >= 0 && box.x + box.width <= 390, `${await cell.textContent()} at ${JSON.stringify(box)}`);
      }
      // Each value says its column, and the table is still a table to a screen reader.
      assert.equal(await row.locator('td.today').evaluate((td) => getComputedStyle(td, '::before').content), '"Today: "');
      assert.equal(await page.getByRole('columnheader', { name: 'Last used' }).count(), 1);
      await row.getByRole('button', { name: /Revoke key/ }).tap();
      await page.getByRole('dialog').getByRole('button', { name: 'Revoke key' }).tap();
      await row.locator('.status', { hasText: 'revoked' }).waitFor();
    } finally {
      await ctx.close();
    }
  });
});

describe('API reference', { skip: SKIP }, () => {
  test('/docs renders every operation under its Content-Security-Policy, with no console error', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const page = await ctx.newPage();
      const errors = watchErrors(page);
      await page.goto(`${base}/docs/`);
      await page.locator('.opblock').first().waitFor({ timeout: 30_000 });
      assert.ok((await page.locator('.opblock').count()) >= 15);
      assert.deepEqual(errors, []);
    } finally {
      await ctx.close();
    }
  });
});

describe('keyboard', { skip: SKIP }, () => {
  test('the skip link comes first with a visible focus ring; a column sorts from the keyboard; a row opens its asset page', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const page = await ctx.newPage();
      await open(page, '/');
      await page.keyboard.press('Tab');
      const first = await page.evaluate(() => {
        const el = document.activeElement as HTMLElement;
        const st = getComputedStyle(el);
        return { text: el.textContent, outline: st.outlineStyle, width: st.outlineWidth };
      });
      assert.equal(first.text, 'Skip to content');
      assert.notEqual(first.outline, 'none');
      assert.equal(first.width, '3px');
      // Sort by price from the keyboard: the header is a button; aria-sort tells the order.
      await page.locator('#signals th', { hasText: 'Price' }).getByRole('button').focus();
      await page.keyboard.press('Enter');
      assert.equal(await page.locator('#signals th', { hasText: 'Price' }).getAttribute('aria-sort'), 'descending');
      const prices = await page.$$eval('#signals tbody tr td:nth-child(5)', (tds) =>
        tds.map((td) => Number(td.textContent!.replace(/[$,]/g, ''))),
      );
      assert.deepEqual(
        prices,
        [...prices].sort((a, b) => b - a),
      );
      assert.equal(prices.length, 11);
      // Sighted users see the direction too: an arrow after the sorted header's label.
      const arrow = () =>
        page.$eval('#signals th[aria-sort] button', (b) => getComputedStyle(b, '::after').content.replace(/"/g, '').trim());
      assert.equal(await arrow(), '▼');
      await page.keyboard.press('Enter');
      assert.equal(await page.locator('#signals th', { hasText: 'Price' }).getAttribute('aria-sort'), 'ascending');
      assert.equal(await arrow(), '▲');
      assert.equal(await page.locator('#signals th[aria-sort]').count(), 1, 'only the sorted column has an arrow');
      // The first row's link opens the asset page.
      await page.locator('#signals tbody tr').first().getByRole('link').focus();
      await page.keyboard.press('Enter');
      await page.waitForURL(/\/asset\//);
      await page.waitForSelector('body[data-ready="true"]');
      assert.match((await page.textContent('h1')) ?? '', /\([A-Z]+\)/);
    } finally {
      await ctx.close();
    }
  });
});

describe('accessibility (axe-core)', { skip: SKIP }, () => {
  test('no serious or critical violations on any page, signed out and signed in; all content in landmarks', async () => {
    // bypassCSP only so axe-core can be injected; the pages are the same.
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 }, bypassCSP: true });
    try {
      const page = await ctx.newPage();
      const found: string[] = [];
      const check = async (what: string) => {
        // Serious and critical, and `region` (moderate: content outside every landmark, such as
        // the offline note was before main), which a screen reader's landmark list skips.
        const serious = await seriousViolations(page);
        const region = await axeViolations(page, ['region']);
        for (const v of [...serious, ...region]) found.push(`${what}: ${v.impact} ${v.id} (${v.help}) ${v.nodes.join(' | ')}`);
      };
      for (const path of ['/', '/asset/bitcoin', '/asset/ethereum', '/chains', '/track-record', '/account']) {
        await open(page, path);
        if (path.startsWith('/asset')) await page.waitForSelector('#chart[data-markers]');
        await check(path);
      }
      const email = `axe.${Date.now()}@example.com`;
      await signUp(page, email);
      await page.waitForSelector('#tier');
      await check('/account (signed in)');
      await page.fill('#key-name', 'axe');
      await page.click('#generate');
      await page.locator('#new-key-dialog').waitFor({ state: 'visible' });
      await check('/account (new key dialog)');
      // The signal history (pro and api tiers), with a "Why" cell opened.
      assert.equal(await svc.keys.setTier(email, 'api'), 1);
      await open(page, '/asset/ripple');
      await page.waitForSelector('table#history tbody tr');
      await page.locator('table#history tbody tr td.why summary').first().click();
      await page.locator('table#history tbody tr td.why details[open] p').first().waitFor({ state: 'visible' });
      await check('/asset/ripple (signal history, api tier)');
      assert.deepEqual(found, [], found.join('\n'));
    } finally {
      await ctx.close();
    }
  });
});

describe('track record page', { skip: SKIP }, () => {
  test('shows the walk-forward figures of GET /api/v1/track-record per asset, pooled and by year, what is out of sample, and the live period', async () => {
    const res = await fetch(`${base}/api/v1/track-record`);
    assert.equal(res.status, 200);
    const t = (await res.json()).data;
    for (const [viewport, mobile] of [
      [{ width: 1280, height: 900 }, false],
      [{ width: 390, height: 844 }, true],
    ] as const) {
      const ctx = await browser.newContext({ viewport, isMobile: mobile, hasTouch: mobile });
      try {
        const page = await ctx.newPage();
        const errors = watchErrors(page);
        // From the overview's link, as a reader would come.
        await open(page, '/');
        await page.click('#main a[href="/track-record"]');
        await page.waitForSelector('table#tr-assets');
        assert.equal(await page.title(), 'Track record - Market Intelligence');
        assert.equal(await page.getAttribute('nav a[data-nav="track-record"]', 'aria-current'), 'page');
        assert.equal(await page.textContent('#tr-live'), t.live.note);
        assert.match((await page.textContent('#tr-caveat')) ?? '', /only the level bands, chosen each year on the data before it/);
        assert.match(
          (await page.textContent('#tr-summary')) ?? '',
          new RegExp(`^${t.model_version}, walk-forward 2020-01-01 → ${t.walk_forward.to}, 10 bps`),
        );
        // One row per asset in the API's order, then the pool; each row's long/flat and
        // buy-and-hold Sharpe as the API gives them, to 2 decimals.
        const rows = await page.$$eval('table#tr-assets tbody tr', (trs) =>
          trs.map((tr) => [...tr.children].map((c) => (c.firstChild?.textContent ?? '').trim())),
        );
        const expected = [...t.walk_forward.assets, { ...t.walk_forward.pooled, symbol: 'Pooled' }];
        assert.deepEqual(
          rows.map((r) => [r[0], r[2], r[5]]),
          expected.map((a: { symbol: string; buy_and_hold: { sharpe: number }; long_flat: { sharpe: number } }) => [
            a.symbol,
            a.buy_and_hold.sharpe.toFixed(2),
            a.long_flat.sharpe.toFixed(2),
          ]),
        );
        // An asset whose long/flat Sharpe beats buy-and-hold's is marked (class up), one that does not is not.
        const marks = await page.$$eval('table#tr-assets tbody tr td:nth-child(6)', (tds) => tds.map((td) => td.classList.contains('up')));
        assert.deepEqual(
          marks,
          expected.map(
            (a: { buy_and_hold: { sharpe: number }; long_flat: { sharpe: number } }) => a.long_flat.sharpe >= a.buy_and_hold.sharpe,
          ),
        );
        assert.ok(marks.includes(true) && marks.includes(false), 'both kinds of row occur on the bundled data');
        // Not by colour alone: a marked cell also says so in text (a check mark, and words for screen readers).
        const said = await page.$$eval('table#tr-assets tbody tr td:nth-child(6)', (tds) => tds.map((td) => td.textContent ?? ''));
        assert.deepEqual(
          said.map((s) => s.includes('(meets target)')),
          marks,
        );
        assert.equal(
          await page.getByRole('table', { name: /^Walk-forward figures per asset/ }).count(),
          1,
          'the table is named by the sentence above it',
        );
        assert.deepEqual(
          await page.$$eval('table#tr-years tbody th', (ths) => ths.map((th) => th.textContent)),
          t.by_year.map((y: { year: number }) => String(y.year)),
        );
        assert.equal(await page.locator('table#tr-choices tbody tr').count(), t.walk_forward.choices.length);
        // Wide tables scroll in their own box: the page itself does not scroll sideways on a phone.
        const { scrollWidth, clientWidth } = await page.evaluate(() => ({
          scrollWidth: document.documentElement.scrollWidth,
          clientWidth: document.documentElement.clientWidth,
        }));
        assert.ok(scrollWidth <= clientWidth, `${viewport.width} px: scrollWidth ${scrollWidth} > clientWidth ${clientWidth}`);
        assert.deepEqual(errors, []);
      } finally {
        await ctx.close();
      }
    }
  });
});

describe('stale marks', { skip: SKIP }, () => {
  test("a stale answer's day is marked on the overview and opens to the API's stale_reason; a fresh one is a plain day", async () => {
    const signals = (await (await fetch(`${base}/api/v1/signals`)).json()).data.signals as {
      asset: string;
      as_of: string;
      stale: boolean;
      stale_reason: string | null;
    }[];
    const stale = signals.find((s) => s.stale)!;
    const fresh = signals.find((s) => !s.stale)!;
    assert.ok(stale && fresh, 'the bundled data has both a stale and a fresh signal');
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const page = await ctx.newPage();
      await open(page, '/');
      const cell = page.locator(`#signals tbody tr[data-asset="${stale.asset}"] td:last-child`);
      assert.equal(await cell.locator('summary').textContent(), `${stale.as_of} (stale)`);
      const reason = cell.locator('details .stale-reason');
      assert.equal(await reason.isVisible(), false);
      await cell.locator('summary').focus();
      await page.keyboard.press('Enter');
      await reason.waitFor({ state: 'visible' });
      assert.equal(await reason.textContent(), stale.stale_reason);
      // A click on the mark closes it and stays on the overview (the rest of the row opens the asset page).
      await cell.locator('summary').click();
      await reason.waitFor({ state: 'hidden' });
      assert.equal(new URL(page.url()).pathname, '/');
      const plain = page.locator(`#signals tbody tr[data-asset="${fresh.asset}"] td:last-child`);
      assert.equal(await plain.textContent(), fresh.as_of);
      assert.equal(await plain.locator('details').count(), 0);
    } finally {
      await ctx.close();
    }
  });

  test('at 375 px the ⚠ under the ticker opens to the same reason by tap or keyboard (not a title), across the screen without a sideways scroll', async () => {
    const signals = (await (await fetch(`${base}/api/v1/signals`)).json()).data.signals as {
      asset: string;
      as_of: string;
      stale: boolean;
      stale_reason: string | null;
    }[];
    const stale = signals.find((s) => s.stale)!;
    const ctx = await browser.newContext({ viewport: { width: 375, height: 740 }, deviceScaleFactor: 1, isMobile: true, hasTouch: true });
    try {
      const page = await ctx.newPage();
      await open(page, '/');
      const first = page.locator(`#signals tbody tr[data-asset="${stale.asset}"] td:first-child`);
      assert.equal(await first.locator('[title]').count(), 0, 'the reason is not only in a title');
      const summary = first.locator('summary');
      const reason = first.locator('details .stale-reason');
      assert.equal(await summary.isVisible(), true);
      assert.equal(await reason.isVisible(), false);
      // A tap opens it, on the overview (the rest of the row opens the asset page).
      await summary.tap();
      await reason.waitFor({ state: 'visible' });
      assert.equal(await reason.textContent(), stale.stale_reason);
      assert.equal(new URL(page.url()).pathname, '/');
      // Across the screen, readable, with no sideways scroll of the page.
      const box = (await reason.boundingBox())!;
      assert.ok(box.x >= 0 && box.x + box.width <= 375 && box.width >= 300, JSON.stringify(box));
      const { scrollWidth, clientWidth } = await page.evaluate(() => ({
        scrollWidth: document.documentElement.scrollWidth,
        clientWidth: document.documentElement.clientWidth,
      }));
      assert.ok(scrollWidth <= clientWidth, `scrollWidth ${scrollWidth} > clientWidth ${clientWidth}`);
      await summary.tap();
      await reason.waitFor({ state: 'hidden' });
      // The keyboard: the mark is focusable and Enter opens it.
      await summary.focus();
      await page.keyboard.press('Enter');
      await reason.waitFor({ state: 'visible' });
      assert.equal(new URL(page.url()).pathname, '/');
    } finally {
      await ctx.close();
    }
  });
});
