//! `.forward_query()` behind the VCL API: the request's query merged into
//! the redirect's `Location` at delivery, so one cached object serves every
//! query. The header is written only when there is a query to merge.

use std::sync::atomic::Ordering::Relaxed;

use shortlink_core::query::{forward_query, query_of};
use varnish::vcl::{Ctx, LogTag, StrOrBytes};

use crate::headers::{headers_named, request_url};
use crate::{backend, redirector};

impl redirector {
    /// What `.forward_query()` does: `Location` of the answer in `ctx`
    /// with the query of `req.url` merged in, unless there is no query,
    /// no `Location`, or the answer is an expired link's fallback.
    pub(crate) fn forward_into_location(&self, ctx: &mut Ctx) {
        // Borrowed from the request's headers alone: the response's are
        // written while the query is read.
        let query = query_of(request_url(ctx.http_req.as_ref()));
        if query.is_empty() {
            return;
        }
        let Some(resp) = ctx.http_resp.as_mut() else {
            return;
        };
        let [location, expired] = headers_named(resp, ["Location", backend::EXPIRED_MARK]);
        let (Some(StrOrBytes::Utf8(location)), None) = (location, expired) else {
            return;
        };
        let stats = &self.resolver().stats;
        let Ok(merged) = forward_query(location, query) else {
            stats.queries_dropped.fetch_add(1, Relaxed);
            return;
        };
        resp.unset_header("Location");
        if let Err(error) = resp.set_header("Location", &merged) {
            // Out of workspace: Varnish answers 500 for this request, as
            // for any header VCL cannot write.
            stats.queries_dropped.fetch_add(1, Relaxed);
            ctx.log(
                LogTag::Error,
                format!("shortlink: query not forwarded: {error}"),
            );
            return;
        }
        stats.queries_forwarded.fetch_add(1, Relaxed);
    }
}
