//! The pages of a link's answers: the body each status carries, for a
//! browser that shows it instead of following the redirect; and the
//! [`Body`] the backend hands Varnish, robots.txt's too.

use shortlink_core::escape_html;
use varnish::vcl::{VclError, VclResponse};

/// The page of a redirect whose target is chosen per request.
pub const CHOSEN_PAGE: &str = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>Moved</title></head><body><p>This link leads to the address in the Location header.</p>\
</body></html>\n";

pub const NOT_FOUND_PAGE: &str =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>Link not found</title></head><body><h1>Link not found</h1>\
<p>This short link does not exist. Check it for typing mistakes.</p></body></html>\n";

pub const DELETED_PAGE: &str = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>Link removed</title></head><body><h1>Link removed</h1>\
<p>This short link was removed by its owner. It will not lead anywhere again.</p></body></html>\n";

pub const EXPIRED_PAGE: &str = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>Link expired</title></head><body><h1>Link expired</h1>\
<p>This short link has expired.</p></body></html>\n";

/// The page of a redirect to `url`, which it names, escaped.
pub fn redirect_page(url: &str) -> String {
    let href = escape_html(url);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Moved</title>\
</head><body><p>This link leads to <a href=\"{href}\">{href}</a>.</p></body></html>\n"
    )
}

/// A response body already rendered in memory.
pub struct Body {
    bytes: Vec<u8>,
    sent: usize,
}

impl Body {
    pub(crate) fn new(bytes: Vec<u8>) -> Self {
        Self { bytes, sent: 0 }
    }
}

impl VclResponse for Body {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, VclError> {
        let rest = &self.bytes[self.sent..];
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.sent += n;
        Ok(n)
    }

    fn len(&self) -> Option<usize> {
        Some(self.bytes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_page_escapes_the_target() {
        let page = redirect_page("https://example.org/?a=1&b=\"<x>'");
        assert!(page.contains("https://example.org/?a=1&amp;b=&quot;&lt;x&gt;&#39;"));
        assert!(!page.contains("<x>"));
    }

    #[test]
    fn body_is_read_in_pieces() {
        let mut body = Body::new(b"hello world".to_vec());
        assert_eq!(body.len(), Some(11));
        let mut buf = [0u8; 4];
        let mut out = Vec::new();
        loop {
            let n = body.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        assert_eq!(out, b"hello world");
    }
}
