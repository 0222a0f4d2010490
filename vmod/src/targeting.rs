//! `.choose()` behind the VCL API: the target of a link with rules or a
//! split, chosen at delivery from the table its cached redirect carries and
//! from the request, with no Redis command.

use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use shortlink_core::rules::{choose, RequestVisit};
use varnish::vcl::{Ctx, VclError};

use crate::backend::{RULES_MARK, TARGET_MARK};
use crate::headers::{headers_named, text};
use crate::{key_of, redirector};

/// The request header the generated VCL keeps a link request's query in.
const QUERY_HEADER: &str = "Shortlink-Query";

impl redirector {
    /// What `.choose()` does: sets the `Location` of the response in `ctx`
    /// to the target its rules or split choose for the request, and
    /// `Shortlink-Target` to the target's label. A response without rules
    /// is left alone.
    pub(crate) fn choose_target(
        &self,
        ctx: &mut Ctx,
        client: Option<SocketAddr>,
    ) -> Result<(), VclError> {
        let (label, target) = {
            let (Some(req), Some(resp)) = (ctx.http_req.as_ref(), ctx.http_resp.as_ref()) else {
                return Ok(());
            };
            let [rules] = headers_named(resp, [RULES_MARK]);
            let Some(rules) = rules else {
                return Ok(());
            };
            let rules = text(Some(&rules));
            let [agent, language, query] =
                headers_named(req, ["User-Agent", "Accept-Language", QUERY_HEADER]);
            let (agent, language, query) = (
                text(agent.as_ref()),
                text(language.as_ref()),
                text(query.as_ref()),
            );
            let url = text(req.url().as_ref());
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_secs());
            let visit = RequestVisit::new(
                &agent,
                &language,
                &query,
                client.map(|client| client.ip()),
                now,
                |address| {
                    self.countries
                        .as_ref()
                        .and_then(|countries| countries.country_code(address))
                },
            );
            let (chosen, target) = choose(&rules, key_of(&url), &visit);
            (chosen.label(), target.map(str::to_owned))
        };
        let stats = &self.resolver().stats;
        stats
            .targets_chosen
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let resp = ctx
            .http_resp
            .as_mut()
            .ok_or("shortlink: .choose() called outside vcl_deliver")?;
        if let Some(target) = target {
            resp.unset_header("Location");
            resp.set_header("Location", &target)?;
        }
        resp.unset_header(TARGET_MARK);
        resp.set_header(TARGET_MARK, label)?;
        Ok(())
    }
}
