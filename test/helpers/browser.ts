import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { createService, type Service } from '../../src/server.ts';
import { testConfig } from './env.ts';

/**
 * A real browser for the dashboard's end-to-end tests: Debian's Chromium (`apt-get install
 * chromium`; `.ci/run` installs it when missing) driven by playwright-core, headless, on
 * loopback only. Tests skip with CHROMIUM_SKIP when it is absent.
 */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const CHROMIUM_SKIP = `SKIPPED: no Chromium at ${CHROMIUM_PATH} (install it with apt-get install chromium; .ci/run does)`;
export const chromiumAvailable = (): boolean => existsSync(CHROMIUM_PATH);

/** Launches headless Chromium (no sandbox: tests may run as root in a container; no network besides loopback use). */
export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
    ],
  });
}

/** A free loopback port: the embedded identity provider must know the public URL before the app is built. */
async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

/** The real service with its embedded identity provider (sign-up in the page), in-memory PGlite, on 127.0.0.1. */
export async function startDashboardService(config: Record<string, string> = {}): Promise<{ svc: Service; base: string }> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const svc = await createService(testConfig({ PORT: String(port), HOST: '127.0.0.1', ...config }), { publicUrl: base });
  await svc.app.listen({ port, host: '127.0.0.1' });
  return { svc, base };
}

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** One axe-core violation, shortened for an assertion message. */
export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: string[];
}

/**
 * Runs axe-core (injected with addScriptTag) on the page as it is (WCAG 2 A/AA rules and
 * best practices) and returns the serious and critical violations.
 */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  return (await axeViolations(page)).filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

/**
 * Runs axe-core on the page as it is and returns every violation of any impact: of the rules
 * `rules` (axe rule ids, e.g. `region`, a moderate one) only when given, else of all of them.
 */
export async function axeViolations(page: Page, rules?: string[]): Promise<AxeViolation[]> {
  await page.addScriptTag({ content: AXE_SOURCE });
  return page.evaluate(async (only) => {
    const axe = (globalThis as unknown as { axe: { run(ctx: unknown, opts: unknown): Promise<any> } }).axe;
    const r = await axe.run(document, {
      resultTypes: ['violations'],
      ...(only ? { runOnly: { type: 'rule', values: only } } : {}),
    });
    return (r.violations as any[]).map((v) => ({
      id: v.id as string,
      impact: v.impact as string | null,
      help: v.help as string,
      nodes: (v.nodes as any[]).slice(0, 3).map((n) => String(n.html).slice(0, 160)),
    }));
  }, rules ?? null);
}
