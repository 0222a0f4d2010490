//! Reading a request's URL and its or a response's headers on the request
//! path: several at once, by their raw bytes; and rewriting one response
//! header in its place.

use std::ffi::c_char;
use std::num::NonZeroUsize;

use varnish::ffi;
use varnish::vcl::{HttpHeaders, StrOrBytes, VclError, Workspace};

/// A request's URL or header value as text, borrowed unless it is not
/// UTF-8 (then with U+FFFD in place of what is not); empty when absent.
pub(crate) fn text(value: Option<&[u8]>) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(value.unwrap_or_default())
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

/// The slot and the value of the first header named each of `names`
/// (ASCII, case-insensitive) in `headers`, found by their raw bytes: no
/// other header is checked as UTF-8 or split into name and value, as
/// `HttpHeaders`' iterator does with each one. A value keeps its bytes.
pub(crate) fn header_slots<'h, const N: usize>(
    headers: &'h HttpHeaders<'_>,
    names: [&str; N],
) -> [Option<(u16, &'h [u8])>; N] {
    let http = &*headers.raw;
    let mut found = [None; N];
    let mut missing = N;
    for slot in FIRST_HEADER..http.nhd {
        // SAFETY: Varnish keeps slots FIRST_HEADER..nhd of `hd` filled for
        // the task, each a range of bytes that outlives this borrow of the
        // headers (workspace or object); an empty slot has null pointers.
        let line = unsafe { line_of(*http.hd.add(usize::from(slot))) };
        for (wanted, name) in found.iter_mut().zip(names) {
            if wanted.is_none() {
                *wanted = value_if_named(line, name).map(|value| (slot, value));
                missing -= usize::from(wanted.is_some());
            }
        }
        // The rest of the headers cannot change what was found first.
        if missing == 0 {
            break;
        }
    }
    found
}

/// Writes `name: value` into `slot` of the client response's `headers`
/// in place of the header it held, in one allocation from `ws` (the
/// task's workspace, which the response's headers live in), and logs it
/// as Varnish logs `set resp.http.<name>`: the old line unset, the new
/// one set. `unset` and `set` would parse every header again and format
/// the line in a heap allocation first.
pub(crate) fn replace_response_header(
    ws: &mut Workspace<'_>,
    headers: &mut HttpHeaders<'_>,
    slot: u16,
    name: &str,
    value: &str,
) -> Result<(), VclError> {
    let http = &mut *headers.raw;
    if !(FIRST_HEADER..http.nhd).contains(&slot) || http.ws != ws.raw {
        return Err(VclError::new(format!(
            "no header slot {slot} in this task's response"
        )));
    }
    let length = name.len() + 2 + value.len();
    let bytes = ws.allocate(NonZeroUsize::MIN.saturating_add(length))?;
    for (to, from) in bytes.iter_mut().zip(
        name.bytes()
            .chain(*b": ")
            .chain(value.bytes())
            .chain(std::iter::once(0)),
    ) {
        to.write(from);
    }
    let start = bytes.as_ptr().cast::<c_char>();
    // SAFETY: `slot` is below `nhd` (checked above), so `hd` and `hdf`
    // hold it; the new line lives in the task's workspace as the old one
    // did, NUL-terminated at `e` as Varnish's own header lines are.
    unsafe {
        let old = *http.hd.add(usize::from(slot));
        let new = ffi::txt {
            b: start,
            e: start.add(length),
        };
        *http.hd.add(usize::from(slot)) = new;
        *http.hdf.add(usize::from(slot)) = 0;
        ffi::VSLbt(http.vsl, ffi::VslTag::RespUnset, old);
        ffi::VSLbt(http.vsl, ffi::VslTag::RespHeader, new);
    }
    Ok(())
}

/// The first slot of `hd` that holds a header (before it: the method or
/// status line's parts).
#[allow(clippy::cast_possible_truncation)]
const FIRST_HEADER: u16 = ffi::HTTP_HDR_FIRST as u16;

/// The bytes of a header line; empty for an empty slot.
///
/// # Safety
/// `line` must be null or a live range of bytes, `b` to `e`.
unsafe fn line_of<'a>(line: ffi::txt) -> &'a [u8] {
    if line.b.is_null() || line.e.is_null() {
        return &[];
    }
    let length = usize::try_from(line.e.offset_from(line.b)).unwrap_or(0);
    std::slice::from_raw_parts(line.b.cast::<u8>(), length)
}

/// The value of header `line` if it is named `name` (ASCII,
/// case-insensitive), without the blanks after its colon.
fn value_if_named<'a>(line: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let (head, rest) = line.split_at_checked(name.len())?;
    if !head.eq_ignore_ascii_case(name.as_bytes()) {
        return None;
    }
    let value = rest.strip_prefix(b":")?;
    let blanks = value
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t'))
        .count();
    Some(&value[blanks..])
}

#[cfg(test)]
mod tests {
    use super::value_if_named;

    #[test]
    fn a_header_is_found_by_its_name_alone() {
        for (line, value) in [
            (
                &b"Location: https://e.org/"[..],
                Some(&b"https://e.org/"[..]),
            ),
            (b"location:\t https://e.org/", Some(b"https://e.org/")),
            (b"LOCATION:", Some(b"")),
            (b"Location-Extra: x", None),
            (b"Locatio: x", None),
            (b"Location", None),
            (b"", None),
            (b"Loc\xe9tion: x", None),
        ] {
            assert_eq!(value_if_named(line, "Location"), value, "{line:?}");
        }
    }
}
