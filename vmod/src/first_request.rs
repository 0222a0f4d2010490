//! `.admit()` and `.answer()` behind the VCL API: a key's first request
//! within the admission window is not cached but answered from its lookup,
//! with the status, headers and page a fetch would give it.

use std::sync::atomic::Ordering;

use varnish::vcl::{Ctx, LogTag};

use crate::backend::{link_of, log_refusal, DOMAIN_HEADER};
use crate::headers::{header_slots, request_url};
use crate::{redirector, without_panic};

impl redirector {
    /// Whether the request's link was asked for within the window; a first
    /// request is remembered, and counted.
    pub(crate) fn admit_request(&self, ctx: &Ctx) -> bool {
        let Some(req) = ctx.http_req.as_ref() else {
            return true;
        };
        let [domain] = header_slots(req, [DOMAIN_HEADER]);
        let path = shortlink_core::query::path_of(request_url(Some(req)));
        let admitted = self
            .admission
            .admit(path.as_bytes(), domain.map(|(_, value)| value));
        if !admitted {
            self.resolver()
                .stats
                .uncached_answers
                .fetch_add(1, Ordering::Relaxed);
        }
        admitted
    }

    /// Looks the request's link up and writes its answer into `resp`,
    /// returning its page; a 503 and no page when Redis does not answer.
    pub(crate) fn answer_request(&self, ctx: &mut Ctx) -> String {
        let written = without_panic(
            || {
                let resolver = self.resolver();
                let (domain, key) = link_of(ctx.http_req.as_ref());
                if crate::backend::is_robots_txt(&key) {
                    let url = request_url(ctx.http_req.as_ref()).to_owned();
                    let resp = ctx
                        .http_resp
                        .as_mut()
                        .ok_or("answer() called outside vcl_synth")?;
                    return resolver
                        .write_robots_txt(domain.as_deref(), &url, resp)
                        .map_err(|e| e.to_string());
                }
                let resolution = resolver.resolve(domain.as_deref(), &key)?;
                let resp = ctx
                    .http_resp
                    .as_mut()
                    .ok_or("answer() called outside vcl_synth")?;
                let page = resolver
                    .write_answer(&resolution, resp)
                    .map_err(|e| e.to_string())?;
                log_refusal(ctx, resolution);
                Ok(page)
            },
            || Err("internal error while answering".to_owned()),
        );
        written.unwrap_or_else(|reason: String| {
            ctx.log(LogTag::Error, format!("shortlink: {reason}"));
            if let Some(resp) = ctx.http_resp.as_mut() {
                // `write_answer` took back what it wrote, if anything.
                resp.set_status(503);
            }
            String::new()
        })
    }
}
