//! `.choose()` and `.target()` behind the VCL API: the target of a link
//! with rules or a split, chosen at delivery from the table its cached
//! redirect carries and from the request, with no Redis command. VCL hands
//! them the headers they read, which it finds without reading the others.

use std::net::SocketAddr;

use shortlink_core::rules::{choose, target_of, Chosen, RequestVisit};
use varnish::vcl::{Ctx, StrOrBytes};

use crate::{key_of, redirector};

impl redirector {
    /// What `.choose()` does: the label of the target `rules` choose for
    /// the request in `ctx`.
    pub(crate) fn choose_label(
        &self,
        ctx: &Ctx,
        rules: &str,
        client: Option<SocketAddr>,
        request: [&str; 3],
    ) -> &'static str {
        let [user_agent, accept_language, query] = request;
        let url = match ctx
            .http_req
            .as_ref()
            .and_then(varnish::vcl::HttpHeaders::url)
        {
            Some(StrOrBytes::Utf8(url)) => url,
            _ => "",
        };
        let now = request_time(ctx);
        let visit = RequestVisit::new(
            user_agent,
            accept_language,
            query,
            client.map(|client| client.ip()),
            now,
            |address| {
                self.countries
                    .as_ref()
                    .and_then(|countries| countries.country_code(address))
            },
        );
        let (chosen, _) = choose(rules, key_of(url), &visit);
        self.resolver()
            .stats
            .targets_chosen
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        chosen.label()
    }
}

/// What `.target()` does: the target `label` names in `rules`, or
/// `location` for the link's own URL or a label that names none.
pub(crate) fn target_named(rules: &str, label: &str, location: &str) -> String {
    Chosen::from_label(label)
        .and_then(|chosen| target_of(rules, chosen))
        .unwrap_or(location)
        .to_owned()
}

/// When the request began, in Unix seconds: Varnish's own clock reading,
/// which spares a system call per delivery.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn request_time(ctx: &Ctx) -> u64 {
    // Seconds since 1970 as a float: whole, positive, far below 2^53.
    ctx.raw.now.0.max(0.0) as u64
}
