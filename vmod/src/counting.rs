//! `.count()` behind the VCL API: which answers are clicks, read from the
//! request and the response in one pass each over their headers' raw
//! bytes, and the click counters copied into varnishstat once per flush.

use shortlink_core::clicks::visits::{cut_asked, VisitKind};
use shortlink_core::rules::Chosen;
use varnish::vcl::{Ctx, StrOrBytes};

use crate::headers::{header_slots, text};
use crate::{backend, clicks, key_of, redirector};

impl redirector {
    /// What `.count()` does: the answer in `ctx`, counted as a click, a
    /// bot's click or a gone link's answer, under its domain's store, and
    /// under the target `.choose()` sent it to.
    pub(crate) fn count_answer(
        &self,
        ctx: &mut Ctx,
        client: Option<std::net::SocketAddr>,
        target: Option<Chosen>,
    ) {
        self.publish_click_counters();
        let Some(resp) = ctx.http_resp.as_ref() else {
            return;
        };
        let status = match resp.status() {
            Some(StrOrBytes::Utf8(status)) => status.parse::<u16>().unwrap_or(0),
            _ => return,
        };
        let Some(req) = ctx.http_req.as_ref() else {
            return;
        };
        let head = matches!(req.method(), Some(StrOrBytes::Utf8("HEAD")));
        // Only whether they are there: no header is read as text.
        let [expired, limited] = header_slots(resp, [backend::EXPIRED_MARK, backend::LIMITED_MARK]);
        let outcome = if status == 410 || expired.is_some() {
            clicks::Outcome::Gone
        } else if status == self.resolver().settings.status.code() {
            // A HEAD is a bot's, which a click limit does not count.
            if limited.is_some() && !head {
                clicks::Outcome::Limited
            } else {
                clicks::Outcome::Redirect
            }
        } else if status == 404 {
            // A well-formed key no link holds (or one not started yet).
            clicks::Outcome::Orphan(VisitKind::InvalidShortUrl)
        } else {
            return;
        };
        self.record_click(ctx, client, outcome, head, target);
    }

    /// What `.count_orphan()` does: the request in `ctx`, a visit to no
    /// link, counted and logged as `kind` for its domain.
    pub(crate) fn count_orphan_visit(
        &self,
        ctx: &mut Ctx,
        client: Option<std::net::SocketAddr>,
        kind: VisitKind,
    ) {
        let Some(req) = ctx.http_req.as_ref() else {
            return;
        };
        let head = matches!(req.method(), Some(StrOrBytes::Utf8("HEAD")));
        self.record_click(ctx, client, clicks::Outcome::Orphan(kind), head, None);
    }

    /// Records the answer to the request in `ctx` as `outcome`, in the
    /// store of the request's domain.
    fn record_click(
        &self,
        ctx: &Ctx,
        client: Option<std::net::SocketAddr>,
        outcome: clicks::Outcome,
        head: bool,
        target: Option<Chosen>,
    ) {
        let Some(req) = ctx.http_req.as_ref() else {
            return;
        };
        // Borrowed from the request, and copied into a queue's buffers:
        // nothing is allocated on this path but for a header that is not
        // UTF-8 or a referrer host in capitals.
        let url = req.url();
        let url = text(url.as_ref().map(AsRef::as_ref));
        let orphan = matches!(outcome, clicks::Outcome::Orphan(_));
        let spaces = &self.resolver().settings.spaces;
        let asked = if orphan {
            cut_asked(shortlink_core::query::path_of(&url))
        } else {
            let key = key_of(&url);
            // The flusher names Redis keys after it: only keys that pass the rules.
            if spaces.default_scheme().check(key).is_err() {
                return;
            }
            key
        };
        let [agent, referrer, domain] =
            header_slots(req, ["User-Agent", "Referer", backend::DOMAIN_HEADER]);
        let domain = domain.map(|(_, name)| text(Some(name)));
        let Some((space, _)) = spaces.of(domain.as_deref()) else {
            return;
        };
        let store = &self.clicks[space];
        if orphan && !store.visits_on() {
            return;
        }
        let (agent, referrer) = (
            text(agent.map(|(_, value)| value)),
            text(referrer.map(|(_, value)| value)),
        );
        if let Some(click) = clicks::Click::new(
            outcome,
            head,
            client.map(|client| client.ip()),
            asked,
            &agent,
            clicks::referrer_host(&referrer).as_deref(),
            target,
        ) {
            store.record(&click);
        }
    }

    /// Copies the click store's counters into this object's varnishstat
    /// counters once per flush.
    fn publish_click_counters(&self) {
        use std::sync::atomic::Ordering::{Acquire, Relaxed};
        // Every store's flushes move the sum of their generations.
        let generation = self
            .clicks
            .iter()
            .map(|store| store.counters.generation.load(Acquire))
            .fold(0_u64, u64::wrapping_add);
        // Read before writing: every delivery calls this, and a write on
        // every call would bounce the line between the workers' cores.
        if self.published.load(Relaxed) == generation
            || self.published.swap(generation, Relaxed) == generation
        {
            return;
        }
        let stats = &self.resolver().stats;
        let sum = |counter: fn(&clicks::ClickStore) -> &std::sync::atomic::AtomicU64| {
            self.clicks
                .iter()
                .map(|store| counter(store).load(Relaxed))
                .sum::<u64>()
        };
        stats
            .clicks_counted
            .store(sum(|store| &store.counters.counted), Relaxed);
        stats
            .clicks_flushed
            .store(sum(|store| &store.counters.flushed), Relaxed);
        stats
            .clicks_dropped
            .store(sum(|store| &store.counters.dropped), Relaxed);
        stats
            .clicks_without_details
            .store(sum(|store| &store.counters.without_details), Relaxed);
        stats
            .click_flush_failures
            .store(sum(|store| &store.counters.flush_failures), Relaxed);
        stats
            .clicks_pending
            .store(sum(|store| &store.counters.pending), Relaxed);
    }
}
