import { createHash } from 'node:crypto';
import { PASSWORD_RULES } from '../auth/password-policy.ts';

/**
 * The sign-in page of the embedded identity provider (GET /signin): sign up or sign in, get
 * the JWT, and copy a curl command that creates an API key. Static HTML with inline style and
 * script (no CDN), pinned by CSP hashes.
 */

const SIGNIN_STYLE = `
body{font:16px/1.5 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
main{max-width:44rem;margin:3rem auto;padding:0 1rem}
h1{font-size:1.4rem;margin:0 0 .25rem}
p.lead{margin:0 0 1.5rem;color:#556}
section{background:#fff;border:1px solid #dde1e7;border-radius:8px;padding:1.25rem 1.5rem;margin-bottom:1rem}
label{display:block;margin:.6rem 0;font-weight:600;font-size:.9rem}
input{display:block;width:100%;box-sizing:border-box;padding:.5rem .6rem;margin-top:.25rem;font:inherit;border:1px solid #c4cad3;border-radius:6px}
.row{display:flex;gap:.5rem;flex-wrap:wrap;margin-top:1rem}
button{font:inherit;padding:.45rem .9rem;border-radius:6px;border:1px solid #2f5bd3;background:#2f5bd3;color:#fff;cursor:pointer}
button.secondary{background:#fff;color:#2f5bd3}
textarea,pre{width:100%;box-sizing:border-box;font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;background:#f1f3f6;border:1px solid #dde1e7;border-radius:6px;padding:.6rem;word-break:break-all;white-space:pre-wrap}
.hint{font-size:.85rem;color:#5b6472;margin:-.25rem 0 .75rem}
#msg{min-height:1.5em;color:#b42318}
#msg.ok{color:#1a7f37}
`;

const SIGNIN_SCRIPT = `
(function () {
  var $ = function (id) { return document.getElementById(id); };
  function say(text, ok) { var m = $('msg'); m.textContent = text; m.className = ok ? 'ok' : ''; }
  function call(path, init) {
    return fetch(path, Object.assign({ credentials: 'same-origin' }, init || {})).then(function (res) {
      return res.json().catch(function () { return null; }).then(function (body) { return { res: res, body: body }; });
    });
  }
  function claimsOf(jwt) {
    var b = jwt.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    while (b.length % 4) b += '=';
    return JSON.parse(atob(b));
  }
  function showToken() {
    return call('/auth/token').then(function (r) {
      if (!r.res.ok || !r.body || typeof r.body.token !== 'string') return false;
      var jwt = r.body.token, c = claimsOf(jwt);
      $('who').textContent = c.email || c.sub;
      $('exp').textContent = new Date(c.exp * 1000).toLocaleTimeString();
      $('jwt').value = jwt;
      $('curl').textContent = "curl -X POST '" + location.origin + "/api/v1/keys/create' \\\\\\n" +
        "  -H 'Authorization: Bearer " + jwt + "' \\\\\\n" +
        "  -H 'Content-Type: application/json' \\\\\\n" +
        "  -d '{\\"name\\":\\"my-key\\"}'";
      $('signed-out').hidden = true;
      $('signed-in').hidden = false;
      return true;
    });
  }
  function submit(kind) {
    var form = $('form');
    if (!form.reportValidity()) return;
    var email = $('email').value.trim(), password = $('password').value;
    var body = kind === 'up' ? { name: $('name').value.trim() || email.split('@')[0], email: email, password: password } : { email: email, password: password };
    say('Working...', true);
    var post = function (what, b) {
      return call('/auth/' + what + '/email', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(b) });
    };
    var errorOf = function (r) {
      return (r.body && ((r.body.error && r.body.error.message) || r.body.message)) || ('Failed (HTTP ' + r.res.status + ')');
    };
    // Sign-up answers alike whether or not the email already has an account; then sign in.
    (kind === 'up' ? post('sign-up', body).then(function (r) {
      if (!r.res.ok) return r;
      return post('sign-in', { email: email, password: password }).then(function (s) {
        if (s.res.status === 401) say('If this email already has an account, sign in with its password.');
        return s.res.status === 401 ? null : s;
      });
    }) : post('sign-in', body)).then(function (r) {
      if (!r) return;
      if (!r.res.ok) { say(errorOf(r)); return; }
      $('password').value = '';
      say('', true);
      return showToken().then(function (ok) { if (!ok) say('Signed in, but no JWT could be obtained.'); });
    }).catch(function () { say('Network error'); });
  }
  function copy(text, what) {
    navigator.clipboard.writeText(text).then(function () { say(what + ' copied', true); }, function () { say('Copy failed: select the text and copy it'); });
  }
  $('form').addEventListener('submit', function (e) { e.preventDefault(); submit('in'); });
  $('signup').addEventListener('click', function () { submit('up'); });
  $('copy').addEventListener('click', function () { copy($('jwt').value, 'JWT'); });
  $('copycurl').addEventListener('click', function () { copy($('curl').textContent, 'Command'); });
  $('refresh').addEventListener('click', function () { showToken(); });
  $('signout').addEventListener('click', function () {
    call('/auth/sign-out', { method: 'POST' }).then(function () {
      $('jwt').value = ''; $('curl').textContent = '';
      $('signed-in').hidden = true; $('signed-out').hidden = false; say('Signed out', true);
    });
  });
  showToken().catch(function () {});
})();
`;

/** The sign-in page: static HTML, inline style and script (no CDN), pinned by CSP hashes. */
export const SIGNIN_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in - Market Intelligence API</title>
<style>${SIGNIN_STYLE}</style>
</head>
<body>
<main>
<h1>Market Intelligence API</h1>
<p class="lead">Sign in to get a JWT, then create API keys with it.</p>
<section id="signed-out">
<form id="form">
<label>Email <input id="email" type="email" autocomplete="username" required maxlength="254"></label>
<label>Password (8 to 128 characters) <input id="password" type="password" autocomplete="current-password" required minlength="8" maxlength="128"></label>
<p class="hint">${PASSWORD_RULES}</p>
<label>Name (for a new account, optional) <input id="name" type="text" autocomplete="name" maxlength="64"></label>
<div class="row"><button type="submit">Sign in</button><button type="button" id="signup" class="secondary">Create account</button></div>
</form>
</section>
<section id="signed-in" hidden>
<p>Signed in as <strong id="who"></strong>. Your JWT (valid 15 minutes, until <span id="exp"></span>):</p>
<textarea id="jwt" rows="6" readonly></textarea>
<div class="row"><button type="button" id="copy">Copy JWT</button><button type="button" id="refresh" class="secondary">New JWT</button><button type="button" id="signout" class="secondary">Sign out</button></div>
<p>Create an API key (the key is shown once):</p>
<pre id="curl"></pre>
<div class="row"><button type="button" id="copycurl">Copy command</button></div>
</section>
<p id="msg" role="status"></p>
</main>
<script>${SIGNIN_SCRIPT}</script>
</body>
</html>
`;

const sha256 = (s: string) => `'sha256-${createHash('sha256').update(s, 'utf8').digest('base64')}'`;

/** Only the page's own inline script and style run; fetches go to this origin only. */
export const SIGNIN_CSP = [
  "default-src 'none'",
  `script-src ${sha256(SIGNIN_SCRIPT)}`,
  `style-src ${sha256(SIGNIN_STYLE)}`,
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');
