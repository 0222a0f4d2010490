// Shlink's own published SDK (@shlinkio/shlink-js-sdk, pinned in
// package.json) against the writer's Shlink API, and the links it creates
// followed through Varnish. The integration suite runs it with its servers:
//   SHLINK_SERVER  the writer's base URL
//   ADMIN_KEY      an admin token; AUTHOR_KEY a plain token no other test
//                  uses; OTHER_KEY another; SHOP_KEY one limited to GO_DOMAIN
//   GO_DOMAIN      the suite's second short domain, on Varnish's port
//   RUN            a word of this run's own, so that its links and tags are new
import { test } from 'node:test';
import http from 'node:http';
import assert from 'node:assert/strict';
import { ShlinkApiClient } from '@shlinkio/shlink-js-sdk';
import { FetchHttpClient } from '@shlinkio/shlink-js-sdk/fetch';
import { ErrorType } from '@shlinkio/shlink-js-sdk/api-contract';

const env = (name) => {
  const value = process.env[name];
  assert.ok(value, `${name} is set`);
  return value;
};
const server = env('SHLINK_SERVER');
const run = env('RUN');
const goDomain = env('GO_DOMAIN');
const client = (apiKey) => new ShlinkApiClient(new FetchHttpClient(), { baseUrl: server, apiKey });
const admin = client(env('ADMIN_KEY'));
const author = client(env('AUTHOR_KEY'));
const shop = client(env('SHOP_KEY'));
const other = client(env('OTHER_KEY'));

const FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0';
const IPHONE = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 '
  + '(KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1';

/** Follows a short URL once, as a browser, naming `host` (else the URL's):
 * the status and where it leads. */
const follow = (url, host, userAgent = FIREFOX, referer = undefined) => new Promise((resolve, reject) => {
  const parsed = new URL(url);
  const headers = { 'User-Agent': userAgent, Host: host ?? parsed.host };
  if (referer) headers.Referer = referer;
  const request = http.get(url, { headers }, (response) => {
    response.resume();
    response.on('end', () => resolve({
      status: response.statusCode,
      location: response.headers.location,
      robots: response.headers['x-robots-tag'],
    }));
  });
  request.on('error', reject);
});

/** A short URL on the suite's second domain, asked for on Varnish's port. */
const onVarnish = (shortUrl) => {
  const parsed = new URL(shortUrl);
  return `http://127.0.0.1:${parsed.port}${parsed.pathname}${parsed.search}`;
};

/** Waits up to `seconds` for `check` to hold, then checks it once more. */
const eventually = async (seconds, check) => {
  const until = Date.now() + seconds * 1000;
  while (Date.now() < until) {
    try {
      return await check();
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
  return check();
};

/** The problem an SDK call is refused with. */
const refusal = async (call) => {
  try {
    await call();
  } catch (problem) {
    return problem;
  }
  assert.fail('the call was refused');
};

const days = (n) => new Date(Date.now() + n * 86_400_000).toISOString().replace(/\.\d+Z$/, '+00:00');

test('health answers pass with a Shlink version, without a key', async () => {
  const health = await client('').health();
  assert.equal(health.status, 'pass');
  assert.match(health.version, /^3\.\d+\.\d+$/);
});

test('a short URL created with every field is served by Varnish as created', async () => {
  const longUrl = `https://example.org/shlink/${run}/full?source=sdk`;
  const validUntil = days(30);
  const created = await admin.createShortUrl({
    longUrl,
    customSlug: `full-${run}`,
    tags: [`launch-${run}`, `news-${run}`],
    title: `Launch ${run}`,
    crawlable: true,
    forwardQuery: true,
    validUntil,
    maxVisits: 100,
    findIfExists: true,
  });
  assert.equal(created.shortCode, `full-${run}`);
  assert.equal(created.longUrl, longUrl, 'longUrl comes back exactly as sent');
  assert.deepEqual(created.tags, [`launch-${run}`, `news-${run}`]);
  assert.equal(created.title, `Launch ${run}`);
  assert.equal(created.crawlable, true);
  assert.equal(created.forwardQuery, true);
  assert.equal(created.domain, null);
  assert.equal(created.meta.validUntil, validUntil);
  assert.equal(created.meta.maxVisits, 100);
  assert.equal(created.meta.validSince, null);
  assert.deepEqual(created.visitsSummary, { total: 0, nonBots: 0, bots: 0 });
  assert.equal(created.hasRedirectRules, false);
  assert.ok(Date.parse(created.dateCreated) > Date.now() - 60_000, created.dateCreated);

  const fetched = await admin.getShortUrl({ shortCode: created.shortCode });
  assert.deepEqual(fetched, created);

  // The native API shows the same link, with its title and tags.
  const native = await fetch(`${server}/api/links/${created.shortCode}`, {
    headers: { Authorization: `Bearer ${env('ADMIN_KEY')}` },
  }).then((response) => response.json());
  assert.equal(native.url, longUrl);
  assert.equal(native.title, `Launch ${run}`);
  assert.deepEqual(native.tags, [`launch-${run}`, `news-${run}`]);
  assert.equal(native.crawlable, true);
  assert.equal(native.max_clicks, 100);
  assert.equal(Date.parse(native.created_at), Date.parse(created.dateCreated));

  const followed = await follow(`${created.shortUrl}?utm_medium=sdk`);
  assert.ok([301, 302, 307, 308].includes(followed.status), `${followed.status}`);
  assert.equal(followed.location, `${longUrl}&utm_medium=sdk`, 'the query is forwarded');
  assert.equal(followed.robots, undefined, 'a crawlable link is sent without noindex');
  const counted = await eventually(15, async () => {
    const now = await admin.getShortUrl({ shortCode: created.shortCode });
    assert.equal(now.visitsSummary.nonBots, 1);
    return now;
  });
  assert.deepEqual(counted.visitsSummary, { total: 1, nonBots: 1, bots: 0 });
});

test('a short URL answers as an unknown code until its start date, and from it at once', async () => {
  const longUrl = `https://example.org/shlink/${run}/launch`;
  const soon = new Date(Date.now() + 3000).toISOString().replace(/\.\d+Z$/, '+00:00');
  const created = await admin.createShortUrl({ longUrl, validSince: soon, customSlug: `soon-${run}` });
  assert.equal(created.meta.validSince, soon);
  const before = await follow(created.shortUrl);
  assert.equal(before.status, 404);
  assert.equal(before.location, undefined);
  const after = await eventually(10, async () => {
    const answer = await follow(created.shortUrl);
    assert.equal(answer.location, longUrl);
    return answer;
  });
  assert.equal(after.location, longUrl);
  const moved = await admin.updateShortUrl({ shortCode: created.shortCode }, { validSince: null });
  assert.equal(moved.meta.validSince, null);
});

test('a generated code is the URL key of the storage contract, found again for the same URL', async () => {
  const longUrl = `https://example.org/shlink/${run}/generated`;
  const first = await author.createShortUrl({ longUrl, shortCodeLength: 6 });
  assert.equal(first.shortCode.length, 6);
  const again = await author.createShortUrl({ longUrl, shortCodeLength: 6 });
  assert.equal(again.shortCode, first.shortCode);
  assert.equal((await follow(first.shortUrl)).location, longUrl);
});

test('a short URL on another domain, and a key limited to it', async () => {
  const longUrl = `https://example.org/shlink/${run}/shop`;
  const created = await shop.createShortUrl({ longUrl, domain: goDomain, customSlug: `shop-${run}` });
  assert.equal(created.domain, goDomain);
  const followed = await follow(onVarnish(created.shortUrl), new URL(created.shortUrl).host);
  assert.equal(followed.location, longUrl);
  const got = await shop.getShortUrl({ shortCode: created.shortCode, domain: goDomain });
  assert.equal(got.longUrl, longUrl);
  const listed = await shop.listShortUrls({ itemsPerPage: -1 });
  assert.ok(listed.data.every((url) => url.domain === goDomain));
  const elsewhere = await refusal(() => shop.createShortUrl({ longUrl, customSlug: `shop2-${run}` }));
  assert.equal(elsewhere.status, 403);
  const domains = await shop.listDomains();
  assert.deepEqual(domains.data.map((domain) => domain.domain), [goDomain]);
  const every = await admin.listDomains();
  assert.deepEqual(every.data.map((domain) => [domain.domain, domain.isDefault]), [
    ['127.0.0.1', true],
    [goDomain, false],
  ]);
  assert.ok('baseUrlRedirect' in every.defaultRedirects);
});

test('listing filters by tags, search, dates and limits, orders and pages', async () => {
  const make = (name, tags, extra = {}) =>
    author.createShortUrl({ longUrl: `https://example.org/shlink/${run}/list/${name}`, customSlug: `${name}-${run}`, tags, ...extra });
  const red = `red-${run}`;
  const blue = `blue-${run}`;
  const a = await make('la', [red], { title: `Apple ${run}` });
  const b = await make('lb', [red, blue], { title: `Banana ${run}` });
  const c = await make('lc', [blue], { title: `Cherry ${run}` });

  const codes = (page) => page.data.map((url) => url.shortCode);
  const any = await author.listShortUrls({ tags: [red, blue], itemsPerPage: -1, orderBy: { field: 'shortCode', dir: 'ASC' } });
  assert.deepEqual(codes(any), [a.shortCode, b.shortCode, c.shortCode]);
  const all = await author.listShortUrls({ tags: [red, blue], tagsMode: 'all', itemsPerPage: -1 });
  assert.deepEqual(codes(all), [b.shortCode]);
  const excluded = await author.listShortUrls({ tags: [red, blue], excludeTags: [blue], itemsPerPage: -1 });
  assert.deepEqual(codes(excluded), [a.shortCode]);
  const searched = await author.listShortUrls({ searchTerm: `cherry ${run}` });
  assert.deepEqual(codes(searched), [c.shortCode]);
  const byTitle = await author.listShortUrls({ tags: [red, blue], orderBy: { field: 'title', dir: 'DESC' }, itemsPerPage: -1 });
  assert.deepEqual(codes(byTitle), [c.shortCode, b.shortCode, a.shortCode]);

  const newest = await author.listShortUrls({ tags: [red, blue], itemsPerPage: 2, page: 1 });
  assert.deepEqual(newest.pagination, {
    currentPage: 1, pagesCount: 2, itemsPerPage: 2, itemsInCurrentPage: 2, totalItems: 3,
  });
  const second = await author.listShortUrls({ tags: [red, blue], itemsPerPage: 2, page: 2 });
  assert.equal(second.data.length, 1);
  assert.equal(new Set([...codes(newest), ...codes(second)]).size, 3, 'pages never overlap');

  const future = await author.listShortUrls({ tags: [red], startDate: days(1) });
  assert.equal(future.data.length, 0);
  const past = await author.listShortUrls({ tags: [red], startDate: days(-1), endDate: days(1), itemsPerPage: -1 });
  assert.equal(past.data.length, 2);

  await follow(a.shortUrl);
  await eventually(15, async () => {
    const byVisits = await author.listShortUrls({ tags: [red, blue], orderBy: { field: 'visits', dir: 'DESC' } });
    assert.equal(byVisits.data[0].shortCode, a.shortCode);
  });

  const limited = await make('ld', [`limit-${run}`], { maxVisits: 1 });
  await follow(limited.shortUrl);
  await eventually(15, async () => {
    const left = await author.listShortUrls({ tags: [`limit-${run}`], excludeMaxVisitsReached: true });
    assert.equal(left.data.length, 0);
  });
  assert.equal((await eventually(15, async () => {
    const answer = await follow(limited.shortUrl);
    assert.equal(answer.status, 410);
    return answer;
  })).status, 410, 'past its visits, the link answers as expired');

  // Another author's links are not listed, nor shown.
  const others = await client(env('SHOP_KEY')).listShortUrls({ tags: [red], itemsPerPage: -1 });
  assert.equal(others.data.length, 0);
});

test('an edit is served by Varnish at once, and a delete ends the link', async () => {
  const created = await author.createShortUrl({
    longUrl: `https://example.org/shlink/${run}/before`, customSlug: `edit-${run}`, tags: ['x'],
  });
  assert.equal((await follow(created.shortUrl)).location, created.longUrl);
  const moved = `https://example.org/shlink/${run}/after`;
  const edited = await author.updateShortUrl(
    { shortCode: created.shortCode },
    { longUrl: moved, title: 'Moved', tags: [`edited-${run}`], crawlable: true, maxVisits: 5 },
  );
  assert.equal(edited.longUrl, moved);
  assert.equal(edited.title, 'Moved');
  assert.deepEqual(edited.tags, [`edited-${run}`]);
  assert.equal(edited.crawlable, true);
  assert.equal(edited.meta.maxVisits, 5);
  assert.equal((await follow(created.shortUrl)).location, moved, 'purged: the edit is served at once');

  const cleared = await author.updateShortUrl({ shortCode: created.shortCode }, { title: null, maxVisits: null, tags: [] });
  assert.equal(cleared.title, null);
  assert.equal(cleared.meta.maxVisits, null);
  assert.deepEqual(cleared.tags, []);

  const notYours = await refusal(() => other.updateShortUrl({ shortCode: created.shortCode }, { title: 'Mine' }));
  assert.equal(notYours.type, ErrorType.INVALID_SHORTCODE);

  await author.deleteShortUrl({ shortCode: created.shortCode });
  assert.equal((await follow(created.shortUrl)).status, 410);
  const gone = await refusal(() => author.getShortUrl({ shortCode: created.shortCode }));
  assert.equal(gone.type, ErrorType.INVALID_SHORTCODE);
  assert.equal(gone.status, 404);
});

test('redirect rules choose the target at the edge, per request', async () => {
  const longUrl = `https://example.org/shlink/${run}/ruled`;
  const created = await author.createShortUrl({ longUrl, customSlug: `rules-${run}` });
  const ios = 'https://apps.example/id1';
  const dutchMail = `https://example.nl/${run}/mail`;
  const set = await author.setShortUrlRedirectRules({ shortCode: created.shortCode }, {
    redirectRules: [
      { longUrl: ios, conditions: [{ type: 'device', matchValue: 'ios', matchKey: null }] },
      {
        longUrl: dutchMail,
        conditions: [
          { type: 'geolocation-country-code', matchValue: 'NL', matchKey: null },
          { type: 'query-param', matchKey: 'ref', matchValue: 'mail' },
        ],
      },
    ],
  });
  assert.equal(set.defaultLongUrl, longUrl);
  assert.deepEqual(set.redirectRules.map((rule) => [rule.longUrl, rule.priority, rule.conditions.length]), [
    [ios, 1, 1],
    [dutchMail, 2, 2],
  ]);
  assert.deepEqual(await author.getShortUrlRedirectRules({ shortCode: created.shortCode }), set);
  assert.equal((await author.getShortUrl({ shortCode: created.shortCode })).hasRedirectRules, true);

  assert.equal((await follow(created.shortUrl, undefined, IPHONE)).location, ios);
  assert.equal((await follow(`${created.shortUrl}?ref=mail`)).location.split('?')[0], dutchMail);
  assert.equal((await follow(created.shortUrl)).location, longUrl);
  const sent = await eventually(15, async () => {
    const list = await author.getShortUrlVisits({ shortCode: created.shortCode });
    assert.equal(list.data.length, 3);
    return list;
  });
  assert.deepEqual(sent.data.map((visit) => visit.redirectUrl), [longUrl, dutchMail, ios],
    'where each visit was sent, newest first');

  const unknown = await refusal(() => author.setShortUrlRedirectRules({ shortCode: created.shortCode }, {
    redirectRules: [{ longUrl: ios, conditions: [{ type: 'browser', matchValue: 'firefox', matchKey: null }] }],
  }));
  assert.equal(unknown.type, ErrorType.INVALID_ARGUMENT);
  assert.match(unknown.detail, /browser/);
  const cleared = await author.setShortUrlRedirectRules({ shortCode: created.shortCode }, { redirectRules: [] });
  assert.deepEqual(cleared.redirectRules, []);
  assert.equal((await follow(created.shortUrl, undefined, IPHONE)).location, longUrl);
});

test('tags are listed, counted, renamed and deleted', async () => {
  const tag = `sale-${run}`;
  const other = `promo-${run}`;
  const one = await author.createShortUrl({ longUrl: `https://example.org/shlink/${run}/t1`, tags: [tag] });
  await author.createShortUrl({ longUrl: `https://example.org/shlink/${run}/t2`, tags: [tag, other] });

  const names = await author.listTags();
  assert.ok(names.data.includes(tag) && names.data.includes(other));
  const sorted = [...names.data].sort((x, y) => x.localeCompare(y));
  assert.deepEqual(names.data.filter((n) => n.endsWith(run)), sorted.filter((n) => n.endsWith(run)));

  await follow(one.shortUrl);
  await eventually(15, async () => {
    const stats = await author.tagsStats();
    const sale = stats.data.find((entry) => entry.tag === tag);
    assert.equal(sale.shortUrlsCount, 2);
    assert.deepEqual(sale.visitsSummary, { total: 1, nonBots: 1, bots: 0 });
  });

  const forbidden = await refusal(() => author.editTag({ oldName: tag, newName: `x-${run}` }));
  assert.equal(forbidden.type, ErrorType.FORBIDDEN_OPERATION);
  const conflict = await refusal(() => admin.editTag({ oldName: tag, newName: other }));
  assert.equal(conflict.type, ErrorType.TAG_CONFLICT);
  const missing = await refusal(() => admin.editTag({ oldName: `none-${run}`, newName: `x-${run}` }));
  assert.equal(missing.type, ErrorType.TAG_NOT_FOUND);

  const renamed = `clearance-${run}`;
  await admin.editTag({ oldName: tag, newName: renamed });
  const after = await author.listShortUrls({ tags: [renamed], itemsPerPage: -1 });
  assert.equal(after.data.length, 2);
  assert.ok(after.data.every((url) => !url.tags.includes(tag)));

  await admin.deleteTags([renamed, other]);
  const left = await author.listTags();
  assert.ok(!left.data.includes(renamed) && !left.data.includes(other));
});

test('the visits overview adds up the links a key may see', async () => {
  const before = await author.getVisitsOverview();
  const created = await author.createShortUrl({ longUrl: `https://example.org/shlink/${run}/overview` });
  assert.equal((await follow(created.shortUrl)).robots, 'noindex', 'a link not crawlable stays unindexed');
  await eventually(15, async () => {
    const after = await author.getVisitsOverview();
    assert.equal(after.nonOrphanVisits.total, before.nonOrphanVisits.total + 1);
    assert.equal(after.nonOrphanVisits.nonBots, before.nonOrphanVisits.nonBots + 1);
  });
  assert.deepEqual(Object.keys(before.orphanVisits).sort(), ['bots', 'nonBots', 'total']);
});

test('every visit is kept: a short URL\'s, a tag\'s, a domain\'s and orphans, with dates and bots', async () => {
  const tag = `visited-${run}`;
  const created = await admin.createShortUrl({ longUrl: `https://example.org/shlink/${run}/visited`, tags: [tag] });
  await follow(created.shortUrl, undefined, FIREFOX, 'https://News.Example.org/item?id=1');
  await follow(created.shortUrl, undefined, IPHONE);
  await follow(created.shortUrl, undefined, 'curl/8.0');
  const mine = (list) => list.data.filter((visit) => visit.visitedUrl === created.shortUrl);
  const visits = await eventually(15, async () => {
    const list = await admin.getShortUrlVisits({ shortCode: created.shortCode });
    assert.equal(list.data.length, 3);
    return list;
  });
  assert.deepEqual(visits.data.map((visit) => visit.userAgent), ['curl/8.0', IPHONE, FIREFOX], 'newest first');
  assert.deepEqual(visits.data.map((visit) => visit.potentialBot), [true, false, false]);
  assert.equal(visits.data[2].referer, 'news.example.org', 'the referrer\'s host');
  assert.ok(visits.data.every((visit) => visit.visitedUrl === created.shortUrl && visit.type === undefined));
  assert.ok(visits.data.every((visit) => visit.redirectUrl === created.longUrl));
  assert.ok(Date.parse(visits.data[0].date) > Date.now() - 60_000, visits.data[0].date);
  assert.equal(visits.pagination.totalItems, 3);

  const people = await admin.getShortUrlVisits({ shortCode: created.shortCode }, { excludeBots: true });
  assert.equal(people.data.length, 2);
  const second = await admin.getShortUrlVisits({ shortCode: created.shortCode }, { page: 2, itemsPerPage: 1 });
  assert.deepEqual([second.data[0].userAgent, second.pagination.pagesCount], [IPHONE, 3]);
  const later = await admin.getShortUrlVisits({ shortCode: created.shortCode }, { startDate: days(1) });
  assert.equal(later.data.length, 0);
  const earlier = await admin.getShortUrlVisits({ shortCode: created.shortCode }, { endDate: days(-1) });
  assert.equal(earlier.data.length, 0);

  assert.equal((await admin.getTagVisits(tag)).data.length, 3);
  await eventually(15, async () => {
    assert.equal(mine(await admin.getDomainVisits('DEFAULT', { itemsPerPage: -1 })).length, 3);
    assert.equal(mine(await admin.getNonOrphanVisits({ excludeBots: true, itemsPerPage: -1 })).length, 2);
  });
  assert.equal(mine(await other.getNonOrphanVisits({ itemsPerPage: -1 })).length, 0, 'another\'s visits stay hidden');

  // Visits to no link: an unknown code, and a path that is no code.
  const unknown = created.shortUrl.replace(created.shortCode, `nocode-${run}`);
  assert.equal((await follow(unknown)).status, 404);
  const elsewhere = created.shortUrl.replace(created.shortCode, `no/such/${run}`);
  assert.equal((await follow(elsewhere)).status, 404);
  await eventually(15, async () => {
    const invalid = await admin.getOrphanVisits({ type: 'invalid_short_url', itemsPerPage: -1 });
    assert.ok(invalid.data.some((visit) => visit.visitedUrl === unknown && visit.type === 'invalid_short_url'));
    const other404 = await admin.getOrphanVisits({ type: 'regular_404', itemsPerPage: -1 });
    assert.ok(other404.data.some((visit) => visit.visitedUrl === elsewhere && visit.type === 'regular_404'));
  });
  const overview = await admin.getVisitsOverview();
  assert.ok(overview.orphanVisits.total >= 2, JSON.stringify(overview));

  assert.deepEqual(await admin.deleteShortUrlVisits({ shortCode: created.shortCode }), { deletedVisits: 3 });
  assert.equal((await admin.getShortUrlVisits({ shortCode: created.shortCode })).data.length, 0);
  const summary = (await admin.getShortUrl({ shortCode: created.shortCode })).visitsSummary;
  assert.deepEqual(summary, { total: 3, nonBots: 2, bots: 1 }, 'the totals stay exact');
  const { deletedVisits } = await admin.deleteOrphanVisits();
  assert.ok(deletedVisits >= 2, `${deletedVisits}`);
});

test('each refusal carries its Shlink problem type and status', async () => {
  const cases = [
    [() => admin.createShortUrl({ longUrl: 'javascript:alert(1)' }), ErrorType.INVALID_ARGUMENT, 400],
    [() => admin.createShortUrl({ longUrl: 'https://example.org/', validUntil: 'soon' }), ErrorType.INVALID_ARGUMENT, 400],
    [() => admin.createShortUrl({ longUrl: 'https://example.org/', validSince: days(2), validUntil: days(1) }), ErrorType.INVALID_ARGUMENT, 400],
    [() => admin.createShortUrl({ longUrl: `https://example.org/shlink/${run}/taken`, customSlug: `full-${run}` }), ErrorType.INVALID_SLUG, 400],
    [() => admin.getShortUrl({ shortCode: `nothing-${run}` }), ErrorType.INVALID_SHORTCODE, 404],
    [() => admin.getShortUrl({ shortCode: `full-${run}`, domain: 'nowhere.test' }), ErrorType.DOMAIN_NOT_FOUND, 404],
    [() => client('').listShortUrls(), ErrorType.INVALID_AUTHORIZATION, 401],
    [() => client('not-a-key-of-this-shortener').listShortUrls(), ErrorType.INVALID_API_KEY, 401],
    [() => admin.mercureInfo(), ErrorType.MERCURE_NOT_CONFIGURED, 501],
    [() => admin.getShortUrlVisits({ shortCode: `nothing-${run}` }), ErrorType.INVALID_SHORTCODE, 404],
    [() => admin.getOrphanVisits({ type: 'elsewhere' }), ErrorType.INVALID_ARGUMENT, 400],
    [() => admin.getShortUrlVisits({ shortCode: `full-${run}` }, { startDate: 'soon' }), ErrorType.INVALID_ARGUMENT, 400],
  ];
  for (const [call, type, status] of cases) {
    const problem = await refusal(call);
    assert.equal(problem.type, type, JSON.stringify(problem));
    assert.equal(problem.status, status, JSON.stringify(problem));
    assert.ok(problem.detail, 'a problem says what to do');
  }
  const invalid = await refusal(() => admin.createShortUrl({ longUrl: 'ftp://example.org/' }));
  assert.deepEqual(invalid.invalidElements, ['longUrl']);
});

test('a domain\'s redirects set through the SDK are what Varnish answers when it returns', async () => {
  const made = await shop.createShortUrl({ longUrl: `https://example.org/shlink/${run}/domain-redirects`, domain: goDomain });
  const short = new URL(made.shortUrl);
  // The domain's links are at its root: `/` is its bare path.
  const at = (path) => follow(onVarnish(`${short.origin}/${path}`), short.host);
  const home = `https://example.org/shlink/${run}/home`;
  const missing = `https://example.org/shlink/${run}/missing`;
  const other = `https://example.org/shlink/${run}/other`;
  assert.notEqual((await at('')).status, 302, 'nothing redirects the bare domain yet');

  const set = await shop.editDomainRedirects({
    domain: goDomain, baseUrlRedirect: home, invalidShortUrlRedirect: missing, regular404Redirect: other,
  });
  assert.deepEqual(set, { baseUrlRedirect: home, regular404Redirect: other, invalidShortUrlRedirect: missing });
  const bare = await at('?ref=card');
  assert.deepEqual([bare.status, bare.location], [302, home]);
  assert.equal((await at(`nothing-${run}`)).location, missing);
  assert.equal((await at('favicon.ico')).location, other);
  assert.equal((await at(made.shortCode)).location, `https://example.org/shlink/${run}/domain-redirects`);
  const listed = await admin.listDomains();
  assert.deepEqual(listed.data.find((domain) => domain.domain === goDomain).redirects, set);

  // One left out is kept; null clears one, and the configuration's (none
  // here) answers again.
  const cleared = await admin.editDomainRedirects({ domain: goDomain, baseUrlRedirect: null });
  assert.deepEqual(cleared, { baseUrlRedirect: null, regular404Redirect: other, invalidShortUrlRedirect: missing });
  assert.notEqual((await at('')).status, 302);
  assert.equal((await at(`nothing-${run}`)).location, missing);

  // They speak for everyone on the domain: a plain key may not set them,
  // nor a key limited to another domain; a bad URL changes nothing.
  const plain = await refusal(() => author.editDomainRedirects({ domain: goDomain, baseUrlRedirect: home }));
  assert.equal(plain.status, 403, JSON.stringify(plain));
  const elsewhere = await refusal(() => shop.editDomainRedirects({ domain: '127.0.0.1', baseUrlRedirect: home }));
  assert.equal(elsewhere.status, 403, JSON.stringify(elsewhere));
  const bad = await refusal(() => admin.editDomainRedirects({ domain: goDomain, regular404Redirect: 'javascript:alert(1)', baseUrlRedirect: home }));
  assert.equal(bad.type, ErrorType.INVALID_ARGUMENT, JSON.stringify(bad));
  assert.deepEqual(bad.invalidElements, ['regular404Redirect']);
  assert.notEqual((await at('')).status, 302, 'a refused change sets nothing');
  const unknown = await refusal(() => admin.editDomainRedirects({ domain: 'nowhere.test', baseUrlRedirect: home }));
  assert.equal(unknown.type, ErrorType.DOMAIN_NOT_FOUND, JSON.stringify(unknown));

  await admin.editDomainRedirects({ domain: goDomain, regular404Redirect: null, invalidShortUrlRedirect: null });
  assert.equal((await at(`nothing-${run}`)).status, 404);
});
