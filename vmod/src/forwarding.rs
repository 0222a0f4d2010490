//! `.forward_query()` behind the VCL API: the request's query merged into
//! the redirect's `Location` at delivery, so one cached object serves every
//! query. The header is written only when there is a query to merge, in
//! its own slot, from a buffer each worker thread keeps: a forwarded hit
//! allocates nothing on the heap and reads no header twice.

use std::cell::RefCell;
use std::sync::atomic::Ordering::Relaxed;

use shortlink_core::query::{forward_query_into, query_of};
use varnish::vcl::{Ctx, LogTag, VclError};

use crate::headers::{header_slots, replace_response_header, request_url};
use crate::{backend, redirector};

thread_local! {
    /// The merged target, kept from one delivery to the next: it grows to
    /// the longest target a worker merged and stays that size.
    static MERGED: RefCell<String> = const { RefCell::new(String::new()) };
}

/// What became of a delivery's `Location`.
enum Outcome {
    /// No `Location`, or an expired link's fallback: nothing to merge into.
    LeftAlone,
    Forwarded,
    /// The query, or the target with it, is past its bound: the target is
    /// answered as stored.
    TooLong,
    NotWritten(VclError),
}

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
        let outcome = MERGED.with_borrow_mut(|merged| {
            let slot = {
                let [location, expired] = header_slots(resp, ["Location", backend::EXPIRED_MARK]);
                let (Some((slot, location)), None) = (location, expired) else {
                    return Outcome::LeftAlone;
                };
                // The backend writes `Location` from a checked target: ASCII.
                let Ok(location) = std::str::from_utf8(location) else {
                    return Outcome::LeftAlone;
                };
                if forward_query_into(location, query, merged).is_err() {
                    return Outcome::TooLong;
                }
                slot
            };
            match replace_response_header(&mut ctx.ws, resp, slot, "Location", merged) {
                Ok(()) => Outcome::Forwarded,
                Err(error) => Outcome::NotWritten(error),
            }
        });
        let stats = &self.resolver().stats;
        match outcome {
            Outcome::LeftAlone => {}
            Outcome::Forwarded => {
                stats.queries_forwarded.fetch_add(1, Relaxed);
            }
            Outcome::TooLong => {
                stats.queries_dropped.fetch_add(1, Relaxed);
            }
            Outcome::NotWritten(error) => {
                // Out of workspace: Varnish answers 500 for this request, as
                // for any header VCL cannot write.
                stats.queries_dropped.fetch_add(1, Relaxed);
                ctx.log(
                    LogTag::Error,
                    format!("shortlink: query not forwarded: {error}"),
                );
            }
        }
    }
}
