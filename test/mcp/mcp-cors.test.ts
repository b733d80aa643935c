import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import type { Service } from '../../src/server.ts';
import { CHROMIUM_SKIP, chromiumAvailable, launchChromium, startDashboardService } from '../helpers/browser.ts';

/**
 * A browser-based MCP client (the MCP Inspector connecting directly, a web app) calls /mcp from
 * another origin: Chromium sends the CORS preflight for Authorization and Mcp-Protocol-Version,
 * and lets the page read the answer and its rate-limit headers only if /mcp allows the origin.
 * Origins outside the Host/Origin check's list (loopback, MCP_ALLOWED_HOSTS) stay refused.
 */
describe('MCP from a web page on another origin (CORS, in Chromium)', { skip: chromiumAvailable() ? false : CHROMIUM_SKIP }, () => {
  let svc: Service;
  let base = '';
  let pageServer: Server;
  let pageOrigin = '';
  let browser: Browser;
  let page: Page;

  before(async () => {
    ({ svc, base } = await startDashboardService());
    // A blank page on another loopback port: another origin, and no CSP of the dashboard's.
    pageServer = createServer((_q, r) => r.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>client</title>'));
    await new Promise<void>((r) => pageServer.listen(0, '127.0.0.1', r));
    pageOrigin = `http://127.0.0.1:${(pageServer.address() as AddressInfo).port}`;
    browser = await launchChromium();
    page = await browser.newPage();
    await page.goto(pageOrigin);
  });
  after(async () => {
    await browser?.close();
    await new Promise((r) => pageServer?.close(r));
    await svc?.stop();
  });

  /** tools/call get_assets from the page, with the headers an MCP client sends; what the page could read. */
  const call = (url: string, key?: string) =>
    page.evaluate(
      async ({ url, key }) => {
        try {
          const r = await fetch(url, {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              accept: 'application/json, text/event-stream',
              'mcp-protocol-version': '2025-06-18',
              ...(key ? { authorization: `Bearer ${key}` } : {}),
            },
            body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_assets', arguments: {} } }),
          });
          const body = await r.json();
          return {
            status: r.status,
            remaining: r.headers.get('x-ratelimit-remaining'),
            tools: body.result?.structuredContent?.assets?.length ?? null,
          };
        } catch (e) {
          return { error: String(e) };
        }
      },
      { url, key },
    );

  test('the page reads the answer and the rate-limit headers; the preflight allows the MCP and key headers', async () => {
    const anonymous = await call(`${base}/mcp`);
    assert.equal((anonymous as { status: number }).status, 200, JSON.stringify(anonymous));
    assert.ok((anonymous as { tools: number }).tools! > 0, JSON.stringify(anonymous));
    assert.match(String((anonymous as { remaining: string }).remaining), /^\d+$/, 'X-RateLimit-Remaining is readable');
    const r = await fetch(`${base}/mcp`, {
      method: 'OPTIONS',
      headers: {
        origin: pageOrigin,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,content-type,mcp-protocol-version',
      },
    });
    assert.equal(r.status, 204);
    assert.equal(r.headers.get('access-control-allow-origin'), pageOrigin);
    assert.match(r.headers.get('access-control-allow-headers') ?? '', /Authorization/);
    assert.match(r.headers.get('access-control-allow-headers') ?? '', /Mcp-Protocol-Version/);
    assert.equal(r.headers.get('access-control-allow-credentials'), null, 'no credentials mode: keys travel in Authorization');
  });

  test('with an API key (the preflight covers Authorization): the call is metered on the key', async () => {
    // Created through the service (the REST route is tested elsewhere); the page only uses it.
    const { key } = await svc.keys.create({ userId: 'cors-user', email: 'cors@example.com' }, 'cors');
    const first = (await call(`${base}/mcp`, key)) as { status: number; remaining: string };
    const second = (await call(`${base}/mcp`, key)) as { status: number; remaining: string };
    assert.equal(first.status, 200, JSON.stringify(first));
    assert.equal(Number(first.remaining) - Number(second.remaining), 1, 'each call counts on the key');
  });

  test('an origin outside the allowed hosts is refused (403, no CORS headers): the page cannot read anything', async () => {
    const r = await fetch(`${base}/mcp`, {
      method: 'OPTIONS',
      headers: { origin: 'http://evil.example', 'access-control-request-method': 'POST' },
    });
    assert.equal(r.status, 403);
    assert.equal(r.headers.get('access-control-allow-origin'), null);
    // Other paths keep their own CORS answers: the /mcp scope's preflight route is /mcp/* only.
    const v1 = await fetch(`${base}/api/v1/assets`, {
      method: 'OPTIONS',
      headers: { origin: 'http://evil.example', 'access-control-request-method': 'GET' },
    });
    assert.equal(v1.status, 204);
    assert.equal(v1.headers.get('access-control-allow-origin'), '*');
    const other = await fetch(`${base}/auth/get-session`, {
      method: 'OPTIONS',
      headers: { origin: pageOrigin, 'access-control-request-method': 'GET' },
    });
    assert.equal(other.headers.get('access-control-allow-origin'), null, 'no CORS on /auth');
  });
});
