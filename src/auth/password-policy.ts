import type { ZxcvbnFactory } from '@zxcvbn-ts/core';

/** Shortest and longest password accepted (characters). */
export const PASSWORD_MIN_LENGTH = 8;
export const PASSWORD_MAX_LENGTH = 128;

/**
 * Lowest zxcvbn score accepted (0..4). zxcvbn estimates the guesses an attacker needs; score 2
 * means at least 10^6 guesses ("somewhat guessable"), which with the sign-in throttle
 * (src/http/identity.ts) is out of reach online. Common passwords, keyboard walks, repeats
 * and sequences (`password`, `12345678`, `aaaaaaaa`, `qwertyui`) score 0 or 1.
 */
export const PASSWORD_MIN_SCORE = 2;

/** What the sign-up page and README say about passwords (one sentence, kept in one place). */
export const PASSWORD_RULES =
  'Passwords are 8 to 128 characters and must not be a common password, a simple pattern (aaaaaaaa, 12345678, qwertyui) or your email or name; a few unrelated words work well.';

/**
 * zxcvbn scores only this many leading characters: its cost grows steeply with length (a
 * 64-character repeat pattern takes ~0.7 s of CPU); a long password with a strong prefix is
 * strong, so this bounds the time per check (tens of milliseconds) without accepting weak ones.
 */
const SCORED_LENGTH = 32;

let factory: Promise<ZxcvbnFactory> | undefined;

/**
 * zxcvbn-ts (the maintained TypeScript port of Dropbox's zxcvbn) with the common and English
 * dictionaries (frequent passwords, names, words, keyboard layouts): loaded on first use
 * (about 3 MB of dictionaries), then shared.
 */
function estimator(): Promise<ZxcvbnFactory> {
  factory ??= (async () => {
    const [{ ZxcvbnFactory }, common, en] = await Promise.all([
      import('@zxcvbn-ts/core'),
      import('@zxcvbn-ts/language-common'),
      import('@zxcvbn-ts/language-en'),
    ]);
    return new ZxcvbnFactory({
      dictionary: { ...common.dictionary, ...en.dictionary },
      graphs: common.adjacencyGraphs,
      translations: en.translations,
      useLevenshteinDistance: false,
      maxLength: SCORED_LENGTH,
      l33tMaxSubstitutions: 8,
    });
  })();
  return factory;
}

/**
 * The minimum password policy of the embedded identity provider (sign-up, change and reset of
 * a password), after NIST SP 800-63B 5.1.1.2: length 8 to 128, not the account's email, its
 * local part or its name (case-insensitive), and a zxcvbn score of at least PASSWORD_MIN_SCORE
 * with the email and name as user inputs (so variations of them score low too). No
 * composition rules (digits, symbols).
 * @param password the candidate password, as typed.
 * @param account the account's email and display name, when known.
 * @returns null when acceptable, else a message for the user saying why and what to do.
 */
export async function passwordProblem(password: string, account: { email?: string; name?: string } = {}): Promise<string | null> {
  if (password.length < PASSWORD_MIN_LENGTH) return `Password too short: use at least ${PASSWORD_MIN_LENGTH} characters. ${PASSWORD_RULES}`;
  if (password.length > PASSWORD_MAX_LENGTH) return `Password too long: use at most ${PASSWORD_MAX_LENGTH} characters.`;
  const email = account.email?.trim().toLowerCase() ?? '';
  const local = email.split('@')[0] ?? '';
  const name = account.name?.trim().toLowerCase() ?? '';
  const p = password.trim().toLowerCase();
  if ((email && p === email) || (local.length > 0 && p === local) || (name && p === name)) {
    return `Password refused: it must not be your email or your name. ${PASSWORD_RULES}`;
  }
  const inputs = [email, local, name, ...name.split(/\s+/)].filter((s) => s.length >= 3);
  const result = (await estimator()).check(password, inputs);
  if (result.score >= PASSWORD_MIN_SCORE) return null;
  const why = result.feedback.warning ? ` (${result.feedback.warning.replace(/\.$/, '')})` : '';
  return `Password too weak${why}: it would be guessed quickly. ${PASSWORD_RULES}`;
}
