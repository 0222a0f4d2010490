//! `.choose()` behind the VCL API: the target of a link with rules or a
//! split, chosen at delivery from the table its cached redirect carries and
//! from the request, with no Redis command. VCL hands it the headers it
//! reads, which it finds without reading the others.

use std::net::SocketAddr;

use shortlink_core::query::query_of;
use shortlink_core::rules::{choose, Chosen, RequestVisit};
use varnish::vcl::Ctx;

use crate::{key_of, redirector};

impl redirector {
    /// What `.choose()` does: the target `rules` choose for the request in
    /// `ctx`, and its URL (`None` for the link's own).
    pub(crate) fn choose_target<'r>(
        &self,
        ctx: &Ctx,
        rules: &'r str,
        client: Option<SocketAddr>,
        request: [&str; 2],
    ) -> (Chosen, Option<&'r str>) {
        let [user_agent, accept_language] = request;
        let url = crate::headers::request_url(ctx.http_req.as_ref());
        let now = request_time(ctx);
        let visit = RequestVisit::new(
            user_agent,
            accept_language,
            query_of(url),
            client.map(|client| client.ip()),
            now,
            |address| {
                self.countries
                    .as_ref()
                    .and_then(|countries| countries.country_code(address))
            },
        );
        self.resolver()
            .stats
            .targets_chosen
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        choose(rules, key_of(url), &visit)
    }
}

/// When the request began, in Unix seconds: Varnish's own clock reading,
/// which spares a system call per delivery.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn request_time(ctx: &Ctx) -> u64 {
    // Seconds since 1970 as a float: whole, positive, far below 2^53.
    ctx.raw.now.0.max(0.0) as u64
}
