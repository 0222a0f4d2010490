//! The pages of a link's answers: the body each status carries, for a
//! browser that shows it instead of following the redirect.

use shortlink_core::escape_html;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_page_escapes_the_target() {
        let page = redirect_page("https://example.org/?a=1&b=\"<x>'");
        assert!(page.contains("https://example.org/?a=1&amp;b=&quot;&lt;x&gt;&#39;"));
        assert!(!page.contains("<x>"));
    }
}
