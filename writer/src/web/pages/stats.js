// The statistics page: shows the report the writer draws for one link,
// fetched with the management page's token (this tab's sessionStorage) as
// a bearer, so it shows exactly what that token may read.
'use strict';
document.documentElement.classList.add('js');

var TOKEN_SLOT = 'shortlink-token';
var $ = function (id) { return document.getElementById(id); };
var key = decodeURIComponent(location.pathname.split('/').pop());
// A link on another domain than the default one names it: ?domain=go.example.
var domain = new URLSearchParams(location.search).get('domain') || '';
var token = sessionStorage.getItem(TOKEN_SLOT);

function say(text, isError) {
  var status = $('status');
  status.textContent = text;
  status.className = isError ? 'error' : 'notice';
}

function signInFirst(message) {
  say(message + ' ', true);
  var link = document.createElement('a');
  link.href = '/manage';
  link.textContent = 'Sign in on the management page';
  $('status').appendChild(link);
}

function load(days) {
  document.querySelectorAll('[data-days]').forEach(function (button) {
    button.setAttribute('aria-pressed', String(button.dataset.days === String(days)));
  });
  say('Loading…');
  var path = '/api/links/' + encodeURIComponent(key) + '/stats/report?days=' + days +
    (domain ? '&domain=' + encodeURIComponent(domain) : '');
  fetch(path, { headers: { Authorization: 'Bearer ' + token }, cache: 'no-store' }).then(function (response) {
    if (response.ok) {
      return response.text().then(function (html) {
        // Drawn and escaped by the writer: no stored text is read as HTML.
        $('report').innerHTML = html;
        say('');
        document.body.dataset.shownDays = String(days);
      });
    }
    return response.json().catch(function () { return {}; }).then(function (body) {
      var message = body.error || 'the shortener answered ' + response.status;
      if (response.status === 401) signInFirst('Your access token is no longer accepted.');
      else say(message, true);
    });
  }, function () {
    say('the shortener did not answer; check your connection and try again', true);
  });
}

$('stats-key').textContent = key;
$('stats-domain-name').textContent = domain;
$('stats-domain').hidden = !domain;
document.title = 'Statistics of ' + key + (domain ? ' on ' + domain : '');
document.querySelectorAll('[data-days]').forEach(function (button) {
  button.addEventListener('click', function () { load(Number(button.dataset.days)); });
});
if (token) load(30);
else signInFirst('This page reads the statistics with your access token.');
