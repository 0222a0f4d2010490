// The management page's rules and split: an editor in the edit dialog
// (a list of rules, each with its conditions and target, and a list of
// weighted split targets), a badge and a summary with clicks per target
// in the link list. Rules and split travel in the API's shape
// (docs/rules.md); the API checks them and names a bad one.
var DEVICES = ['ios', 'android', 'mobile', 'desktop'];

// "DE, AT" as ["DE", "AT"].
function listOf(text) {
  return text.split(',').map(function (value) { return value.trim(); }).filter(Boolean);
}

// "ref=mail,news&src=x" as {ref: ["mail", "news"], src: ["x"]}.
function queryOf(text) {
  var query = {};
  text.split('&').map(function (pair) { return pair.trim(); }).filter(Boolean).forEach(function (pair) {
    var at = pair.indexOf('=');
    var name = at < 0 ? pair : pair.slice(0, at);
    query[name.trim()] = at < 0 ? [] : listOf(pair.slice(at + 1));
  });
  return query;
}

function queryText(query) {
  return Object.keys(query || {}).map(function (name) { return name + '=' + query[name].join(','); }).join('&');
}

// A labelled input of a rule or split row; its label names the row, so a
// screen reader tells "Rule 2 country" from "Rule 1 country".
function rowInput(row, part, label, type, value, hint) {
  var wrap = element('label', 'rule-part');
  wrap.appendChild(element('span', null, label));
  var input = element('input', 'rule-' + part);
  input.type = type;
  input.value = value || '';
  input.autocomplete = 'off';
  input.spellcheck = false;
  if (hint) input.placeholder = hint;
  wrap.appendChild(input);
  row.appendChild(wrap);
  return input;
}

function removeButton(row, label) {
  var button = element('button', 'secondary remove-row', 'Remove');
  button.type = 'button';
  button.setAttribute('aria-label', label);
  button.addEventListener('click', function () { row.remove(); numberRows(); });
  row.appendChild(button);
}

function numberRows() {
  $('rules-list').querySelectorAll('fieldset.rule').forEach(function (row, n) {
    row.querySelector('legend').textContent = 'Rule ' + (n + 1);
  });
  $('split-list').querySelectorAll('fieldset.split-target').forEach(function (row, n) {
    row.querySelector('legend').textContent = 'Split target ' + (n + 1);
  });
}

function addRule(rule) {
  rule = rule || {};
  var row = element('fieldset', 'rule');
  row.appendChild(element('legend'));
  var devices = element('div', 'rule-devices');
  devices.appendChild(element('span', null, 'Device'));
  DEVICES.forEach(function (device) {
    var label = element('label', 'check');
    var box = element('input', 'rule-device');
    box.type = 'checkbox';
    box.value = device;
    box.checked = (rule.device || []).indexOf(device) >= 0;
    label.appendChild(box);
    label.appendChild(document.createTextNode(' ' + device));
    devices.appendChild(label);
  });
  row.appendChild(devices);
  rowInput(row, 'country', 'Country', 'text', (rule.country || []).join(', '), 'DE, AT');
  rowInput(row, 'language', 'Language', 'text', (rule.language || []).join(', '), 'de, pt-BR');
  rowInput(row, 'query', 'Query parameter', 'text', queryText(rule.query), 'ref=mail,news');
  rowInput(row, 'from', 'From (local time)', 'datetime-local', toLocalInput(rule.from));
  rowInput(row, 'until', 'Until (local time)', 'datetime-local', toLocalInput(rule.until));
  rowInput(row, 'url', 'Target URL', 'url', rule.url, 'https://');
  removeButton(row, 'Remove this rule');
  $('rules-list').appendChild(row);
  numberRows();
  return row;
}

function addSplit(target) {
  target = target || {};
  var row = element('fieldset', 'split-target');
  row.appendChild(element('legend'));
  rowInput(row, 'weight', 'Weight (0 to 1000)', 'number', target.weight == null ? '' : String(target.weight), '50');
  rowInput(row, 'url', 'Target URL', 'url', target.url, 'https://');
  removeButton(row, 'Remove this split target');
  $('split-list').appendChild(row);
  numberRows();
  return row;
}

// The editor's rules and split in the API's shape; an empty part is left
// out, so the API's answer for it names what is missing.
function readTargeting() {
  var rules = [];
  $('rules-list').querySelectorAll('fieldset.rule').forEach(function (row) {
    var value = function (part) { return row.querySelector('.rule-' + part).value.trim(); };
    var rule = {};
    var devices = [];
    row.querySelectorAll('.rule-device:checked').forEach(function (box) { devices.push(box.value); });
    if (devices.length) rule.device = devices;
    if (listOf(value('country')).length) rule.country = listOf(value('country'));
    if (listOf(value('language')).length) rule.language = listOf(value('language'));
    if (value('query')) rule.query = queryOf(value('query'));
    if (value('from')) rule.from = new Date(value('from')).toISOString();
    if (value('until')) rule.until = new Date(value('until')).toISOString();
    rule.url = value('url');
    rules.push(rule);
  });
  var split = [];
  $('split-list').querySelectorAll('fieldset.split-target').forEach(function (row) {
    var weight = row.querySelector('.rule-weight').value.trim();
    split.push({ weight: weight === '' ? 0 : Number(weight), url: row.querySelector('.rule-url').value.trim() });
  });
  return { rules: rules, split: split };
}

// Fills the editor with `link`'s rules and split, and remembers what it
// reads back, so that saving sends them only when the user changed them.
function fillTargeting(link) {
  $('rules-list').textContent = '';
  $('split-list').textContent = '';
  (link.rules || []).forEach(addRule);
  (link.split || []).forEach(addSplit);
  $('edit-targeting').open = !!((link.rules || []).length || (link.split || []).length);
  var read = readTargeting();
  return { rules: JSON.stringify(read.rules), split: JSON.stringify(read.split) };
}

// Adds to `change` the rules and split the user changed; `null` removes.
function targetingChange(change, before) {
  var now = readTargeting();
  if (JSON.stringify(now.rules) !== before.rules) change.rules = now.rules.length ? now.rules : null;
  if (JSON.stringify(now.split) !== before.split) change.split = now.split.length ? now.split : null;
}

// Shows a 422 about the rules or the split next to them; whether it did.
function targetingError(field, message) {
  var shown = false;
  [['rules', 'edit-rules-help'], ['split', 'edit-split-help']].forEach(function (pair) {
    var help = $(pair[1]);
    var bad = field === pair[0];
    shown = shown || bad;
    help.textContent = bad ? message : help.dataset.hint;
    help.className = bad ? 'error' : 'hint';
  });
  if (shown) $('edit-targeting').open = true;
  return shown;
}

function describeRule(rule) {
  var parts = [];
  if (rule.device) parts.push('device ' + rule.device.join('/'));
  if (rule.country) parts.push('country ' + rule.country.join('/'));
  if (rule.language) parts.push('language ' + rule.language.join('/'));
  if (rule.query) parts.push('query ' + queryText(rule.query));
  if (rule.from) parts.push('from ' + localTime(rule.from));
  if (rule.until) parts.push('until ' + localTime(rule.until));
  return parts.join(' & ');
}

// The badge and the summary of a link's rules and split in its row; the
// clicks per target are read when the summary is opened.
function targetingSummary(link, head, item) {
  var rules = link.rules || [], split = link.split || [];
  if (!rules.length && !split.length) return;
  head.appendChild(element('span', 'rules-badge', split.length && !rules.length ? 'split' : 'rules'));
  var details = element('details', 'targets');
  details.appendChild(element('summary', null, rules.length + ' rule' + (rules.length === 1 ? '' : 's') +
    (split.length ? ', split over ' + split.length + ' target' + (split.length === 1 ? '' : 's') : '')));
  var list = element('ul', 'target-list');
  var entry = function (label, text, url) {
    var line = element('li');
    line.dataset.target = label;
    line.appendChild(element('span', null, text + ' → ' + url + ' '));
    line.appendChild(element('span', 'target-clicks'));
    list.appendChild(line);
  };
  rules.forEach(function (rule, n) { entry('r' + (n + 1), 'Rule ' + (n + 1) + ' (' + describeRule(rule) + ')', rule.url); });
  split.forEach(function (target, n) { entry('s' + (n + 1), 'Split ' + (n + 1) + ' (weight ' + target.weight + ')', target.url); });
  if (!split.length) entry('url', 'Otherwise', link.url);
  details.appendChild(list);
  details.addEventListener('toggle', function () {
    if (!details.open || details.dataset.loaded) return;
    details.dataset.loaded = 'yes';
    api('GET', linkPath(link.key, link.domain, '/stats?days=1')).then(function (result) {
      if (!result.response.ok) { failure(result, function (m) { say(m, true); }); return; }
      (result.body.targets || []).forEach(function (target) {
        var line = list.querySelector('li[data-target="' + target.target + '"] .target-clicks');
        if (line) line.textContent = '(' + target.clicks + (target.clicks === 1 ? ' click)' : ' clicks)');
      });
    });
  });
  item.appendChild(details);
}

$('add-rule').addEventListener('click', function () { addRule().querySelector('.rule-device').focus(); });
$('add-split').addEventListener('click', function () { addSplit().querySelector('.rule-weight').focus(); });
