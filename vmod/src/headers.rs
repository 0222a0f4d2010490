//! Reading a request's URL and its or a response's headers on the request
//! path: several at once, borrowed where they are UTF-8.

use varnish::vcl::{HttpHeaders, StrOrBytes};

/// The first value of each of `names` (case-insensitive) in `headers`,
/// read in one pass: `HttpHeaders::header` reads every header, each checked
/// as UTF-8, once per name, on every counted answer.
pub(crate) fn headers_named<'a, const N: usize>(
    headers: &'a HttpHeaders<'a>,
    names: [&str; N],
) -> [Option<StrOrBytes<'a>>; N] {
    let mut found = [const { None }; N];
    let mut missing = N;
    for (name, value) in headers {
        if let Some(slot) = names
            .iter()
            .position(|wanted| wanted.eq_ignore_ascii_case(name))
        {
            if found[slot].is_none() {
                found[slot] = Some(value);
                missing -= 1;
                if missing == 0 {
                    break;
                }
            }
        }
    }
    found
}

/// A request's URL or header as text, borrowed unless it is not UTF-8.
pub(crate) fn text<'a>(value: Option<&StrOrBytes<'a>>) -> std::borrow::Cow<'a, str> {
    match value {
        Some(StrOrBytes::Utf8(text)) => std::borrow::Cow::Borrowed(text),
        Some(StrOrBytes::Bytes(bytes)) => String::from_utf8_lossy(bytes),
        None => std::borrow::Cow::Borrowed(""),
    }
}

/// The client request's URL, query and all; empty outside a client task
/// or when it is not UTF-8 (no link's URL then). It takes the request's
/// headers (`ctx.http_req`) rather than the context, so that the response's
/// can be written while the URL is borrowed.
pub(crate) fn request_url<'h>(req: Option<&'h HttpHeaders<'_>>) -> &'h str {
    match req.and_then(HttpHeaders::url) {
        Some(StrOrBytes::Utf8(url)) => url,
        _ => "",
    }
}
