// The dashboard part of `npm run bench`: the overview page's weight (what a browser downloads,
// gzip as served) and its time to first render and to interactive in headless Chromium on
// loopback (targets: under 300 KB of JavaScript gzipped, interactive under 1 s).
import http from 'node:http';
import { CHARTS_FILE } from '../src/web/routes.ts';
import { CHROMIUM_SKIP, chromiumAvailable, launchChromium } from '../test/helpers/browser.ts';

/** Bytes of one response as sent on the wire with `Accept-Encoding: gzip` (no decompression). */
function wireBytes(url: string): Promise<{ bytes: number; encoding: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers: { 'accept-encoding': 'gzip' } }, (res) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => (bytes += c.length));
        res.on('end', () => resolve({ bytes, encoding: String(res.headers['content-encoding'] ?? 'identity') }));
      })
      .on('error', reject);
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const kb = (b: number) => `${(b / 1024).toFixed(1)} KB`;

/** Prints the overview's page weight and render times, measured against the service at `base`. */
export async function benchDashboard(base: string, runs = 5): Promise<void> {
  const html = await wireBytes(`${base}/`);
  const js = await wireBytes(`${base}/app/static/app.js`);
  const css = await wireBytes(`${base}/app/static/app.css`);
  const charts = await wireBytes(`${base}/app/vendor/${CHARTS_FILE}`);
  console.log(
    `dashboard overview weight (gzip as served): JS ${kb(js.bytes)} (target < 300 KB), HTML ${kb(html.bytes)}, CSS ${kb(css.bytes)}; ` +
      `asset pages add lightweight-charts ${kb(charts.bytes)} (JS total there ${kb(js.bytes + charts.bytes)})`,
  );
  if (!chromiumAvailable()) {
    console.log(`dashboard render times: ${CHROMIUM_SKIP}`);
    return;
  }
  const browser = await launchChromium();
  try {
    const fcp: number[] = [];
    const ready: number[] = [];
    const transferred: number[] = [];
    for (let i = 0; i < runs; i++) {
      // A fresh context per run: cold cache, like a first visit.
      const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const page = await ctx.newPage();
      await page.goto(`${base}/`);
      await page.waitForSelector('body[data-ready="true"]');
      const t = await page.evaluate(() => ({
        fcp: performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? NaN,
        ready: performance.getEntriesByName('dashboard-ready')[0]?.startTime ?? NaN,
        bytes: (performance.getEntriesByType('resource') as PerformanceResourceTiming[]).reduce(
          (a, r) => a + r.transferSize,
          (performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming | undefined)?.transferSize ?? 0,
        ),
      }));
      fcp.push(t.fcp);
      ready.push(t.ready);
      transferred.push(t.bytes);
      await ctx.close();
    }
    console.log(
      `dashboard overview in Chromium (median of ${runs} cold loads, loopback): first contentful paint ${median(fcp).toFixed(0)} ms, ` +
        `interactive with data ${median(ready).toFixed(0)} ms (target < 1000 ms), transferred ${kb(median(transferred))} (headers included)`,
    );
  } finally {
    await browser.close();
  }
}
