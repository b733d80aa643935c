import { isIPv6 } from 'node:net';

/**
 * The client address as the per-address limits count it (the unauthenticated tier, the
 * failed-authentication budget, the dashboard budget, the sign-in limits): an IPv4 address as
 * is; an IPv6 address by its /64 prefix (`2001:db8:1:2::/64`), the block one subscriber or
 * host is usually given (RFC 6177, RFC 7934 section 6): counted per address, a client could
 * take a fresh address of its /64 for every request and never run out; an IPv4-mapped IPv6
 * address (`::ffff:192.0.2.1`, a dual-stack listener's form) as its IPv4 address, so that
 * both forms share one count. The access log keeps the full address (`req.ip`).
 * @param ip the client's IP as Fastify gives it (`req.ip`: the socket's peer, or with
 *   TRUST_PROXY the forwarded client), or `socket.remoteAddress`.
 * @returns the subject to count; anything that is not an IPv6 address is returned unchanged.
 */
export function rateLimitAddress(ip: string): string {
  // Every request's path (twice): an IPv4 address, which has no colon, needs no parsing.
  if (!ip.includes(':') || !isIPv6(ip)) return ip;
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(ip);
  if (mapped) return mapped[1]!;
  // Expand to 8 groups: a zone id (`%eth0`) dropped, an embedded IPv4 tail as two groups.
  let s = ip.split('%')[0]!;
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(s);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    s = `${s.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = s.split('::') as [string, string | undefined];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}
