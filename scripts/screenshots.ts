// Screenshots of the dashboard for the README (`npm run screenshots`): the overview, an asset
// page and the API keys section, taken in headless Chromium (test/helpers/browser.ts) from
// the real service on an in-memory database with the bundled dataset. Writes
// docs/dashboard-overview.png, docs/dashboard-asset.png, docs/dashboard-keys.png and
// docs/dashboard-phone.png.
import path from 'node:path';
import { ROOT_DIR } from '../src/config.ts';
import { CHROMIUM_SKIP, chromiumAvailable, launchChromium, startDashboardService } from '../test/helpers/browser.ts';

if (!chromiumAvailable()) {
  console.error(CHROMIUM_SKIP);
  process.exit(1);
}

const out = (name: string) => path.join(ROOT_DIR, 'docs', name);
const { svc, base } = await startDashboardService();
const browser = await launchChromium();
try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 1 });
  const page = await ctx.newPage();
  const open = async (p: string) => {
    await page.goto(`${base}${p}`);
    await page.waitForSelector('body[data-ready="true"]');
  };

  await open('/');
  await page.screenshot({ path: out('dashboard-overview.png'), fullPage: true });

  await open('/asset/ethereum');
  await page.waitForSelector('#chart[data-markers]');
  await page.waitForTimeout(300);
  await page.screenshot({ path: out('dashboard-asset.png'), fullPage: true });

  await open('/account');
  await page.fill('#email', 'ada@example.com');
  await page.fill('#password', 'correct horse battery staple');
  await page.click('#signup');
  await page.waitForSelector('#tier');
  for (const name of ['laptop', 'ci-pipeline']) {
    await page.fill('#key-name', name);
    await page.click('#generate');
    await page.locator('#new-key-dialog').waitFor({ state: 'visible' });
    if (name === 'ci-pipeline') await page.screenshot({ path: out('dashboard-new-key.png') });
    await page.locator('#new-key-dialog').getByRole('button', { name: 'Close' }).click();
  }
  await page.waitForSelector('#keys tbody tr:nth-child(2)');
  await page
    .locator('#h-api-keys')
    .locator('..')
    .screenshot({ path: out('dashboard-keys.png') });

  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, deviceScaleFactor: 1 });
  const p2 = await phone.newPage();
  await p2.goto(`${base}/`);
  await p2.waitForSelector('body[data-ready="true"]');
  await p2.screenshot({ path: out('dashboard-phone.png'), fullPage: false });
  console.log('wrote docs/dashboard-{overview,asset,keys,new-key,phone}.png');
} finally {
  await browser.close();
  await svc.stop();
}
