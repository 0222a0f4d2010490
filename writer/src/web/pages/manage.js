// The management page: everything goes through the JSON API with the
// token as a bearer, so the page can do exactly what the token may.
// The token stays in this tab's sessionStorage: closing the tab or
// signing out forgets it, and no cookie carries it to the server.
'use strict';
document.documentElement.classList.add('js');

var TOKEN_SLOT = 'shortlink-token';
var PAGE_SIZE = 20;
var $ = function (id) { return document.getElementById(id); };
var state = { token: sessionStorage.getItem(TOKEN_SLOT), cursor: null, search: '', domain: '', tag: '', editing: null, deleting: null };
// The short domains (the default one first), and those whose links forward
// a click's query string unless they say otherwise.
var DOMAINS = $('manager').dataset.domains.split(' ').filter(Boolean);
var FORWARDING = $('manager').dataset.forwarding.split(' ').filter(Boolean);
var UTM = ['utm_source', 'utm_medium', 'utm_campaign', 'utm_term', 'utm_content'];
var CAMPAIGN_HINT = $('edit-campaign-help').textContent;

// A link's path under the API; a link on another domain than the default
// names its domain.
function linkPath(key, domain, tail) {
  var path = '/api/links/' + encodeURIComponent(key) + (tail || '');
  if (!domain || domain === DOMAINS[0]) return path;
  return path + (path.indexOf('?') < 0 ? '?' : '&') + 'domain=' + encodeURIComponent(domain);
}

// The rule Varnish forwards a click's query string with, and the form adds
// campaign parameters with (forward_query in shortlink_core's query.rs):
// the query's parameters are added to the target's, a target parameter the
// query names again is replaced, and the target's fragment stays last.
// `query` is already percent-encoded.
function mergeQuery(target, query) {
  var hash = target.indexOf('#');
  var before = hash < 0 ? target : target.slice(0, hash);
  var mark = before.indexOf('?');
  var own = mark < 0 ? '' : before.slice(mark + 1);
  var nameOf = function (pair) { return pair.split('=')[0]; };
  var named = query.split('&').map(nameOf);
  var pairs = own.split('&').filter(function (pair) { return pair && named.indexOf(nameOf(pair)) < 0; })
    .concat(query.split('&').filter(Boolean));
  return (mark < 0 ? before : before.slice(0, mark)) + (pairs.length ? '?' + pairs.join('&') : '') +
    (hash < 0 ? '' : target.slice(hash));
}

// The campaign parameters typed, each value encoded as the form's are.
function campaignQuery() {
  return UTM.map(function (name) {
    var value = $('edit-campaign').querySelector('[name="' + name + '"]').value.trim();
    return value ? name + '=' + encodeURIComponent(value) : '';
  }).filter(Boolean).join('&');
}

function campaignError(message) {
  var help = $('edit-campaign-help');
  help.textContent = message || CAMPAIGN_HINT;
  help.className = message ? 'error' : 'hint';
  if (message) $('edit-campaign').open = true;
}

function forwardChoice(link) {
  return link.forward_query === true ? 'always' : link.forward_query === false ? 'never' : 'default';
}

function api(method, path, body, etag) {
  var headers = { Authorization: 'Bearer ' + state.token };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (etag) headers['If-Match'] = etag;
  return fetch(path, {
    method: method, headers: headers, cache: 'no-store',
    body: body === undefined ? undefined : JSON.stringify(body)
  }).then(function (response) {
    if (response.status === 204) return { response: response, body: null };
    return response.json().catch(function () { return {}; }).then(function (json) {
      return { response: response, body: json };
    });
  }, function () {
    return { response: { ok: false, status: 0 }, body: { error: 'the shortener did not answer; check your connection and try again' } };
  });
}

// A failed call: a token that stopped working signs the page out; anything
// else is shown where the user is looking.
function failure(result, show) {
  if (result.response.status === 401) {
    signOut('Your access token is no longer accepted; sign in again.');
    return;
  }
  show(result.body && result.body.error ? result.body.error : 'the shortener answered ' + result.response.status);
}

function say(text, isError) {
  var status = $('status');
  status.textContent = text;
  status.className = isError ? 'error' : 'notice';
}

function showSignIn(message) {
  $('sign-in').hidden = false;
  $('manager').hidden = true;
  var help = $('token-help');
  help.textContent = message || 'Kept in this browser tab only, until you sign out or close it.';
  help.className = message ? 'error' : 'hint';
  $('token').setAttribute('aria-invalid', message ? 'true' : 'false');
  $('token').focus();
}

function signOut(message) {
  sessionStorage.removeItem(TOKEN_SLOT);
  state.token = null;
  $('link-list').textContent = '';
  showSignIn(message);
}

function signIn(token) {
  state.token = token;
  api('GET', '/api/whoami').then(function (result) {
    if (!result.response.ok) {
      state.token = null;
      showSignIn(result.response.status === 401
        ? 'This access token is not valid; check it with whoever runs this shortener.'
        : (result.body.error || 'the shortener answered ' + result.response.status));
      return;
    }
    sessionStorage.setItem(TOKEN_SLOT, token);
    $('token').value = '';
    $('who').textContent = result.body.name + (result.body.admin ? ' (admin: every link)' : '');
    $('yourls-signature').textContent = result.body.yourls_signature;
    // A token limited to some domains is offered those only.
    var allowed = result.body.domains;
    if (allowed && $('domain-filter')) {
      $('domain-filter').querySelectorAll('option').forEach(function (option) {
        option.hidden = option.disabled = !!option.value && allowed.indexOf(option.value) < 0;
      });
      $('domain-filter').value = state.domain = '';
      $('domain-filter').hidden = allowed.length < 2;
    }
    $('sign-in').hidden = true;
    $('manager').hidden = false;
    load(true);
  });
}

function load(fresh) {
  if (fresh) { state.cursor = null; $('link-list').textContent = ''; }
  var query = '?limit=' + PAGE_SIZE;
  if (state.cursor) query += '&cursor=' + encodeURIComponent(state.cursor);
  if (state.search) query += '&search=' + encodeURIComponent(state.search);
  if (state.domain) query += '&domain=' + encodeURIComponent(state.domain);
  if (state.tag) query += '&tag=' + encodeURIComponent(state.tag);
  $('tag-filter').hidden = !state.tag;
  $('tag-filter-name').textContent = state.tag;
  $('more').hidden = true;
  api('GET', '/api/links' + query).then(function (result) {
    if (!result.response.ok) { failure(result, function (m) { say(m, true); }); return; }
    result.body.links.forEach(function (link) { $('link-list').appendChild(row(link)); });
    state.cursor = result.body.next_cursor;
    $('more').hidden = !state.cursor;
    var shown = $('link-list').children.length;
    var where = (state.domain ? ' on ' + state.domain : '') + (state.tag ? ' tagged ' + state.tag : '');
    say(shown === 0
      ? (state.search ? 'No link' + where + ' matches "' + state.search + '".' : 'No links' + where + ' yet: shorten one first.')
      : shown + (state.cursor ? '+' : '') + ' link' + (shown === 1 ? '' : 's') + where +
        (state.search ? ' matching "' + state.search + '"' : ''), false);
  });
}

function element(tag, className, text) {
  var node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function localTime(rfc3339) {
  return new Date(rfc3339).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

// One link, built from text nodes only: nothing stored is read as HTML.
function row(link) {
  var item = element('li', 'link');
  item.dataset.key = link.key;
  if (link.domain) item.dataset.domain = link.domain;
  var head = element('div', 'link-head');
  var short = element('a', 'short', link.short_url);
  short.href = link.short_url;
  head.appendChild(short);
  if (DOMAINS.length > 1 && link.domain) head.appendChild(element('span', 'domain', link.domain));
  if (link.expired) head.appendChild(element('span', 'badge', 'expired'));
  item.appendChild(head);
  if (link.title) item.appendChild(element('div', 'title', link.title));
  item.appendChild(element('div', 'target', link.url));
  if (link.tags && link.tags.length) {
    var tags = element('div', 'tags');
    link.tags.forEach(function (tag) {
      var chip = element('button', 'tag', tag);
      chip.type = 'button';
      chip.setAttribute('aria-label', 'Show the links tagged ' + tag);
      chip.addEventListener('click', function () { state.tag = tag; load(true); });
      tags.appendChild(chip);
    });
    item.appendChild(tags);
  }
  var meta = [];
  if (link.expires_at) meta.push((link.expired ? 'Expired ' : 'Expires ') + localTime(link.expires_at));
  if (link.expired_url) meta.push('then leads to ' + link.expired_url);
  if (link.max_clicks != null) meta.push('limited to ' + link.max_clicks + (link.max_clicks === 1 ? ' click' : ' clicks'));
  if (link.forward_query === true) meta.push('forwards query strings');
  if (link.forward_query === false) meta.push('never forwards query strings');
  meta.push(link.owner ? 'created by ' + link.owner : 'created without a token');
  item.appendChild(element('div', 'meta', meta.join(' · ')));
  targetingSummary(link, head, item);
  var actions = element('div', 'row-actions');
  var edit = element('button', 'secondary edit', 'Edit');
  edit.type = 'button';
  edit.setAttribute('aria-label', 'Edit ' + link.key);
  edit.addEventListener('click', function () { openEdit(link.key, link.domain); });
  var remove = element('button', 'danger delete', 'Delete');
  remove.type = 'button';
  remove.setAttribute('aria-label', 'Delete ' + link.key);
  remove.addEventListener('click', function () { openDelete(link.key, link.domain); });
  var stats = element('a', 'stats-link', 'Statistics');
  stats.href = '/manage/stats/' + encodeURIComponent(link.key) +
    (link.domain && link.domain !== DOMAINS[0] ? '?domain=' + encodeURIComponent(link.domain) : '');
  stats.setAttribute('aria-label', 'Statistics of ' + link.key);
  var qr = element('a', 'qr-link', 'QR code');
  qr.href = linkPath(link.key, link.domain, '/qr.png?size=512');
  qr.download = link.key + '.png';
  qr.setAttribute('aria-label', 'Download the QR code of ' + link.key);
  actions.appendChild(edit);
  actions.appendChild(remove);
  actions.appendChild(stats);
  actions.appendChild(qr);
  item.appendChild(actions);
  return item;
}

function rowOf(key, domain) {
  var selector = 'li.link[data-key="' + CSS.escape(key) + '"]';
  if (domain) selector += '[data-domain="' + CSS.escape(domain) + '"]';
  return document.querySelector(selector);
}

function replaceRow(link) {
  var old = rowOf(link.key, link.domain);
  if (old) old.replaceWith(row(link));
}

// datetime-local speaks the browser's local time, the API UTC.
function toLocalInput(rfc3339) {
  if (!rfc3339) return '';
  var at = new Date(rfc3339);
  var pad = function (n) { return String(n).padStart(2, '0'); };
  return at.getFullYear() + '-' + pad(at.getMonth() + 1) + '-' + pad(at.getDate()) +
    'T' + pad(at.getHours()) + ':' + pad(at.getMinutes());
}

// The edit form's inputs are named like the API's fields, so a 422 is
// shown next to the input it blames.
function fieldError(field, message) {
  var blamed = false;
  $('edit-form').querySelectorAll('input[name], select[name]').forEach(function (input) {
    var help = document.getElementById(input.id + '-help');
    if (!help) return;
    var bad = input.name === field;
    blamed = blamed || bad;
    input.setAttribute('aria-invalid', bad ? 'true' : 'false');
    help.textContent = bad ? message : help.dataset.hint;
    help.className = bad ? 'error' : 'hint';
  });
  campaignError('');
  blamed = targetingError(field, message) || blamed;
  var general = $('edit-error');
  general.hidden = !message || blamed;
  general.textContent = general.hidden ? '' : message;
}

function clickLimitText(link) {
  return link.max_clicks == null ? '' : String(link.max_clicks);
}

function fillEdit(link, etag) {
  state.editing = { key: link.key, domain: link.domain, etag: etag, link: link };
  $('edit-key').textContent = DOMAINS.length > 1 && link.domain ? link.domain + ' ' + link.key : link.key;
  $('edit-url').value = link.url;
  $('edit-link-title').value = link.title || '';
  $('edit-tags').value = (link.tags || []).join(', ');
  $('edit-expires').value = toLocalInput(link.expires_at);
  $('edit-expired-url').value = link.expired_url || '';
  $('edit-max-clicks').value = clickLimitText(link);
  $('edit-forward').value = forwardChoice(link);
  var forwards = FORWARDING.indexOf(link.domain || DOMAINS[0]) >= 0;
  $('edit-forward').querySelector('option[value=default]').textContent =
    'As the domain does (' + (forwards ? 'forward' : 'do not forward') + ')';
  UTM.forEach(function (name) { $('edit-campaign').querySelector('[name="' + name + '"]').value = ''; });
  $('edit-campaign').open = false;
  state.editing.targeting = fillTargeting(link);
  fieldError(null, '');
}

function openEdit(key, domain) {
  api('GET', linkPath(key, domain)).then(function (result) {
    if (!result.response.ok) { failure(result, function (m) { say(m, true); }); return; }
    fillEdit(result.body, result.response.headers.get('ETag'));
    $('edit-dialog').showModal();
    $('edit-url').focus();
  });
}

// Sends only what the user changed, so an untouched past expiry or an
// untouched URL is never checked again.
function saveEdit(event) {
  event.preventDefault();
  var editing = state.editing;
  var change = {};
  var url = $('edit-url').value.trim();
  // Campaign parameters go into the URL field, where the user sees them,
  // and the typed ones are cleared: saving again adds nothing twice.
  var campaign = campaignQuery();
  if (campaign.length > Number($('edit-campaign').dataset.maxQuery)) {
    campaignError('The campaign parameters take over ' + $('edit-campaign').dataset.maxQuery +
      ' bytes once encoded; shorten them.');
    return;
  }
  if (campaign) {
    url = mergeQuery(url, campaign);
    $('edit-url').value = url;
    UTM.forEach(function (name) { $('edit-campaign').querySelector('[name="' + name + '"]').value = ''; });
  }
  if (url !== editing.link.url) change.url = url;
  var title = $('edit-link-title').value.trim();
  if (title !== (editing.link.title || '')) change.title = title || null;
  var tags = $('edit-tags').value.split(',').map(function (tag) { return tag.trim(); })
    .filter(function (tag) { return tag; });
  if (tags.join(',') !== (editing.link.tags || []).join(',')) change.tags = tags;
  var forward = $('edit-forward').value;
  if (forward !== forwardChoice(editing.link)) {
    change.forward_query = forward === 'always' ? true : forward === 'never' ? false : null;
  }
  var expires = $('edit-expires').value;
  if (expires !== toLocalInput(editing.link.expires_at)) {
    change.expires_at = expires ? new Date(expires).toISOString() : null;
  }
  var expiredUrl = $('edit-expired-url').value.trim();
  if (expiredUrl !== (editing.link.expired_url || '')) change.expired_url = expiredUrl || null;
  var limit = $('edit-max-clicks');
  // A number input reads '' for text it cannot parse: say so, not "no limit".
  if (limit.validity.badInput) { fieldError('max_clicks', 'Type the click limit as a whole number, or leave it empty for no limit.'); return; }
  if (limit.value.trim() !== clickLimitText(editing.link)) {
    change.max_clicks = limit.value.trim() === '' ? null : Number(limit.value);
  }
  targetingChange(change, editing.targeting);
  if (Object.keys(change).length === 0) { $('edit-dialog').close(); return; }
  $('edit-save').disabled = true;
  api('PATCH', linkPath(editing.key, editing.domain), change, editing.etag).then(function (result) {
    $('edit-save').disabled = false;
    var status = result.response.status;
    if (result.response.ok) {
      $('edit-dialog').close();
      replaceRow(result.body);
      say(result.body.warning ? 'Saved ' + editing.key + ', but ' + result.body.warning : 'Saved ' + editing.key + ': it leads to the new target from the next click.', !!result.body.warning);
    } else if (status === 412) {
      // Someone else changed it meanwhile: show theirs, keep nothing of ours.
      api('GET', linkPath(editing.key, editing.domain)).then(function (fresh) {
        if (fresh.response.ok) { fillEdit(fresh.body, fresh.response.headers.get('ETag')); replaceRow(fresh.body); }
        fieldError(null, 'This link was changed elsewhere while you edited it. The form now shows its current state; make your change again.');
      });
    } else if (status === 422) {
      fieldError(result.body.field, result.body.error);
    } else {
      failure(result, function (m) { fieldError(null, m); });
    }
  });
}

function openDelete(key, domain) {
  state.deleting = { key: key, domain: domain };
  $('delete-key').textContent = key;
  $('delete-dialog').showModal();
  $('delete-cancel').focus();
}

function confirmDelete(event) {
  event.preventDefault();
  var key = state.deleting.key, domain = state.deleting.domain;
  $('delete-confirm').disabled = true;
  api('DELETE', linkPath(key, domain)).then(function (result) {
    $('delete-confirm').disabled = false;
    $('delete-dialog').close();
    if (!result.response.ok) { failure(result, function (m) { say(m, true); }); return; }
    var old = rowOf(key, domain);
    if (old) old.remove();
    say(result.body && result.body.warning
      ? 'Deleted ' + key + ', but ' + result.body.warning
      : 'Deleted ' + key + ': it answers "410 Gone" from now on.', !!(result.body && result.body.warning));
  });
}

document.querySelectorAll('[data-hint]').forEach(function (help) { help.textContent = help.dataset.hint; });
$('sign-in-form').addEventListener('submit', function (event) {
  event.preventDefault();
  var token = $('token').value.trim();
  if (token) signIn(token); else showSignIn('Enter your access token.');
});
$('sign-out').addEventListener('click', function () { signOut(); });
$('search-form').addEventListener('submit', function (event) {
  event.preventDefault();
  state.search = $('search').value.trim();
  load(true);
});
if ($('domain-filter')) {
  $('domain-filter').addEventListener('change', function () {
    state.domain = $('domain-filter').value;
    state.search = $('search').value.trim();
    load(true);
  });
}
$('tag-filter-clear').addEventListener('click', function () { state.tag = ''; load(true); });
$('more').addEventListener('click', function () { load(false); });
$('edit-form').addEventListener('submit', saveEdit);
$('edit-cancel').addEventListener('click', function () { $('edit-dialog').close(); });
$('edit-clear-expiry').addEventListener('click', function () { $('edit-expires').value = ''; });
$('delete-form').addEventListener('submit', confirmDelete);
$('delete-cancel').addEventListener('click', function () { $('delete-dialog').close(); });
if (state.token) signIn(state.token); else showSignIn();
