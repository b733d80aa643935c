import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import { crc32 } from 'node:zlib';

/**
 * API key format (README, "Sign up, get a JWT, create a key"): `svc_live_` + 32 base62 random characters +
 * a 6-character base62 CRC32 of the random part, like GitHub's token format, so a leaked
 * key can be recognised offline and a typo is rejected without a database look-up.
 */
export const KEY_PREFIX = 'svc_live_';
const RANDOM_LEN = 32;
const CHECKSUM_LEN = 6;
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_RE = new RegExp(`^${KEY_PREFIX}[0-9A-Za-z]{${RANDOM_LEN + CHECKSUM_LEN}}$`);

/** Base62 of a non-negative integer, left-padded with '0' to `width`. */
export function base62(n: number, width: number): string {
  let s = '';
  let v = n;
  do {
    s = ALPHABET[v % 62] + s;
    v = Math.floor(v / 62);
  } while (v > 0);
  return s.padStart(width, '0');
}

/** The 6-character base62 CRC32 checksum of the random part of a key. */
export function checksum(random: string): string {
  return base62(crc32(random) >>> 0, CHECKSUM_LEN);
}

/** 32 uniformly random base62 characters (rejection sampling over random bytes). */
function randomBase62(len: number): string {
  let out = '';
  while (out.length < len) {
    for (const b of randomBytes(len * 2)) {
      if (b < 248) out += ALPHABET[b % 62]; // 248 = 4 * 62: no modulo bias
      if (out.length === len) break;
    }
  }
  return out;
}

/** A new key: the full secret (shown once), its SHA-256 digest and its display prefix. */
export interface NewKey {
  key: string;
  hash: string;
  prefix: string;
}

/** Generates a new API key. */
export function generateKey(): NewKey {
  const random = randomBase62(RANDOM_LEN);
  const key = `${KEY_PREFIX}${random}${checksum(random)}`;
  return { key, hash: hashKey(key), prefix: displayPrefix(key) };
}

/** SHA-256 hex digest of a full key: the only form in which keys are stored. */
export function hashKey(key: string): string {
  return hash('sha256', key, 'hex'); // one-shot crypto.hash (Node >= 20.12): cheaper than createHash per request
}

/** `svc_live_` + the first 4 random characters, for display in key lists. */
export function displayPrefix(key: string): string {
  return key.slice(0, KEY_PREFIX.length + 4);
}

/** Why a string is not a well-formed key, or null when it is one. */
export function keyFormatError(key: string): 'malformed' | 'bad_checksum' | null {
  if (!KEY_RE.test(key)) return 'malformed';
  const random = key.slice(KEY_PREFIX.length, KEY_PREFIX.length + RANDOM_LEN);
  const sum = key.slice(KEY_PREFIX.length + RANDOM_LEN);
  const expected = checksum(random);
  return timingSafeEqual(Buffer.from(sum), Buffer.from(expected)) ? null : 'bad_checksum';
}

/** True when a bearer token looks like an API key (as opposed to a JWT). */
export function looksLikeApiKey(token: string): boolean {
  return token.startsWith(KEY_PREFIX);
}
