import { boolean, index, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/*
 * Tables of the embedded identity provider (better-auth 1.7: core schema + jwt plugin), see
 * src/auth/identity.ts. Table names are prefixed `auth_` so they never clash with the
 * service's own tables (`app_users` is this service's view of a user: plan and keys; `auth_user`
 * is the identity: email and credentials; both share the id, which is the JWT `sub`).
 *
 * better-auth's drizzle adapter finds a table by its model name (AUTH_MODELS below) and a
 * column by its property name, so property names are better-auth's field names (camelCase)
 * and SQL column names are snake_case. Ids are better-auth's random 32-character strings.
 */

/** Accounts that can sign in (better-auth model `user`). `email` is stored lowercased. */
export const authUser = pgTable('auth_user', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  email: text('email').notNull().unique(),
  emailVerified: boolean('email_verified').notNull().default(false),
  image: text('image'),
  createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' })
    .notNull()
    .defaultNow()
    .$onUpdate(() => new Date()),
});

/** Sign-in sessions (better-auth model `session`): `token` is the opaque session token carried by the cookie / bearer header. */
export const authSession = pgTable(
  'auth_session',
  {
    id: text('id').primaryKey(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }).notNull(),
    token: text('token').notNull().unique(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' })
      .notNull()
      .$onUpdate(() => new Date()),
    ipAddress: text('ip_address'),
    userAgent: text('user_agent'),
    userId: text('user_id')
      .notNull()
      .references(() => authUser.id, { onDelete: 'cascade' }),
  },
  (t) => [index('auth_session_user_id_idx').on(t.userId)],
);

/**
 * Credentials of a user (better-auth model `account`). For email + password,
 * `provider_id = 'credential'` and `password` holds the scrypt hash (`salt:key`, hex), never
 * the password. The OAuth token columns stay empty (no social providers are configured).
 */
export const authAccount = pgTable(
  'auth_account',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id').notNull(),
    providerId: text('provider_id').notNull(),
    userId: text('user_id')
      .notNull()
      .references(() => authUser.id, { onDelete: 'cascade' }),
    accessToken: text('access_token'),
    refreshToken: text('refresh_token'),
    idToken: text('id_token'),
    accessTokenExpiresAt: timestamp('access_token_expires_at', { withTimezone: true, mode: 'date' }),
    refreshTokenExpiresAt: timestamp('refresh_token_expires_at', { withTimezone: true, mode: 'date' }),
    scope: text('scope'),
    password: text('password'),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' })
      .notNull()
      .$onUpdate(() => new Date()),
  },
  (t) => [index('auth_account_user_id_idx').on(t.userId)],
);

/** One-time values (better-auth model `verification`: email verification, password reset). */
export const authVerification = pgTable(
  'auth_verification',
  {
    id: text('id').primaryKey(),
    identifier: text('identifier').notNull(),
    value: text('value').notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }).notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' })
      .notNull()
      .defaultNow()
      .$onUpdate(() => new Date()),
  },
  (t) => [index('auth_verification_identifier_idx').on(t.identifier)],
);

/**
 * JWT signing keys (better-auth jwt plugin model `jwks`): `public_key` is the public JWK
 * (JSON), `private_key` the private JWK encrypted with the identity provider's secret; the
 * row id is the JWT header `kid`. Keys with `expires_at` stay published for a grace period.
 */
export const authJwks = pgTable('auth_jwks', {
  id: text('id').primaryKey(),
  publicKey: text('public_key').notNull(),
  privateKey: text('private_key').notNull(),
  createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
  expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }),
  alg: text('alg'),
  crv: text('crv'),
});

/** better-auth model names (`user: { modelName }` etc. in src/auth/identity.ts), equal to the table names. */
export const AUTH_MODELS = {
  user: 'auth_user',
  session: 'auth_session',
  account: 'auth_account',
  verification: 'auth_verification',
  jwks: 'auth_jwks',
} as const;

/** The schema object handed to better-auth's drizzle adapter: model name -> table. */
export const authSchema = {
  [AUTH_MODELS.user]: authUser,
  [AUTH_MODELS.session]: authSession,
  [AUTH_MODELS.account]: authAccount,
  [AUTH_MODELS.verification]: authVerification,
  [AUTH_MODELS.jwks]: authJwks,
};
