//! A link's first clicks on a day: the details and visitors of the first
//! flush that counts the link that day, kept as one field of the day's
//! hash of first clicks (`short:first:20261123:Lm`, field `25`) instead of
//! in keys of the link's own.
//!
//! Most links of a shortener are clicked once or twice and never again.
//! Making a details hash and a `HyperLogLog` for each, each with its TTL,
//! was most of what the clicks' Redis spent on a fresh link; a field in a
//! hash many links share costs a fraction of that. A link clicked again in
//! a later flush of the day has its further details counted in its details
//! hash and its further visitors in its register, as before; readers add
//! the days' first clicks to both.
//!
//! The field's value is text, a line per detail and one of visitors:
//!
//! ```text
//! 3 referrer:news.example.com
//! 3 browser:Firefox
//! visitors 0a1b2c3d4e5f6a7b 8c9d0e1f2a3b4c5d
//! ```
//!
//! Counts come first, so that a detail field (which holds no line break)
//! runs to its line's end. Visitors are salted digests, as the link's
//! register holds them, so that the flush script can move them there: it
//! does so when it first writes the link's register of that day, so the
//! register and the record never count one visitor both (see the VMOD's
//! `clicks/flusher/apply_batch.lua`, which reads this format too).

use std::io::Write as _;

/// Most bytes of one link's first clicks: a link whose first flush of a
/// day counts more (many referrers, or visitors) goes straight to its own
/// keys. A fresh link's takes about 100; under 2,048, the value bound
/// below which Redis keeps a hash compact (`hash-max-listpack-value`).
pub const MAX_FIRST_CLICKS: usize = 1024;

/// The word starting the line of visitors.
const VISITORS: &str = "visitors";

/// Writes one link's first clicks at the end of a buffer; nothing, if they
/// do not fit in [`MAX_FIRST_CLICKS`] or cannot be written (a field with a
/// line break).
pub struct FirstClicksWriter<'b> {
    out: &'b mut Vec<u8>,
    start: usize,
    visitors: bool,
    fits: bool,
}

impl<'b> FirstClicksWriter<'b> {
    pub fn new(out: &'b mut Vec<u8>) -> Self {
        let start = out.len();
        Self {
            out,
            start,
            visitors: false,
            fits: true,
        }
    }

    /// A detail field, in its parts, and its count. Details come before
    /// visitors.
    pub fn detail(&mut self, field: &[&str], n: u64) {
        debug_assert!(!self.visitors, "details come first");
        if field.iter().any(|part| part.contains('\n')) || field.concat().is_empty() {
            self.fits = false;
            return;
        }
        let _ = write!(self.out, "{n} ");
        for part in field {
            self.out.extend_from_slice(part.as_bytes());
        }
        self.out.push(b'\n');
        self.check();
    }

    /// A visitor's salted digest, as hex.
    pub fn visitor(&mut self, digest: &[u8]) {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        if !self.visitors {
            self.out.extend_from_slice(VISITORS.as_bytes());
            self.visitors = true;
        }
        self.out.push(b' ');
        for byte in digest {
            self.out.push(DIGITS[usize::from(byte >> 4)]);
            self.out.push(DIGITS[usize::from(byte & 0xf)]);
        }
        self.check();
    }

    fn check(&mut self) {
        if self.out.len() - self.start > MAX_FIRST_CLICKS {
            self.fits = false;
        }
    }

    /// Whether the first clicks were written; if not, the buffer is as it
    /// was.
    #[must_use]
    pub fn finish(self) -> bool {
        if self.fits && self.out.len() > self.start {
            if self.visitors {
                self.out.push(b'\n');
            }
            if self.out.len() - self.start <= MAX_FIRST_CLICKS {
                return true;
            }
        }
        self.out.truncate(self.start);
        false
    }
}

/// One link's first clicks, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirstClicks<'t>(&'t str);

impl<'t> FirstClicks<'t> {
    #[must_use]
    pub fn new(text: &'t str) -> Self {
        Self(text)
    }

    /// The detail fields and their counts; a line that is neither is
    /// skipped (a value written by hand).
    pub fn details(self) -> impl Iterator<Item = (&'t str, u64)> {
        self.0.lines().filter_map(|line| {
            let (count, field) = line.split_once(' ')?;
            Some((field, count.parse().ok()?))
        })
    }

    /// The visitors' digests, each once.
    #[must_use]
    pub fn visitors(self) -> Vec<&'t str> {
        let mut digests: Vec<&str> = (self.0.lines())
            .filter_map(|line| line.strip_prefix(VISITORS)?.strip_prefix(' '))
            .flat_map(str::split_whitespace)
            .collect();
        digests.sort_unstable();
        digests.dedup();
        digests
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clicks::Detail;

    #[test]
    fn first_clicks_read_back_as_written() {
        let mut out = b"before".to_vec();
        let mut record = FirstClicksWriter::new(&mut out);
        record.detail(&Detail::Referrer.field_parts("news.example.com"), 3);
        record.detail(&Detail::Browser.field_parts("Chrome Mobile"), 1);
        record.visitor(&[0x0a, 0x1b, 0xff]);
        record.visitor(&[0x00, 0x01, 0x02]);
        assert!(record.finish());
        let text = std::str::from_utf8(&out)
            .unwrap()
            .strip_prefix("before")
            .unwrap();
        assert_eq!(
            text,
            "3 referrer:news.example.com\n1 browser:Chrome Mobile\nvisitors 0a1bff 000102\n"
        );
        let read = FirstClicks::new(text);
        let details: Vec<_> = read.details().collect();
        assert_eq!(
            details,
            [
                ("referrer:news.example.com", 3),
                ("browser:Chrome Mobile", 1)
            ]
        );
        assert_eq!(read.visitors(), ["000102", "0a1bff"]);
    }

    #[test]
    fn first_clicks_that_do_not_fit_leave_nothing() {
        let mut out = b"before".to_vec();
        let mut record = FirstClicksWriter::new(&mut out);
        record.detail(&["referrer:", "a\nb"], 1);
        assert!(!record.finish());
        let mut record = FirstClicksWriter::new(&mut out);
        for n in 0..200 {
            record.visitor(&u64::to_be_bytes(n));
        }
        assert!(!record.finish(), "past {MAX_FIRST_CLICKS} bytes");
        assert!(
            !FirstClicksWriter::new(&mut out).finish(),
            "nothing to write"
        );
        assert_eq!(out, b"before");
        let mut record = FirstClicksWriter::new(&mut out);
        for n in 0..50 {
            record.visitor(&u64::to_be_bytes(n));
        }
        assert!(record.finish(), "50 visitors fit");
    }

    #[test]
    fn lines_written_by_hand_are_skipped() {
        let read = FirstClicks::new("x referrer:a\n2 os:Linux\nvisitors\nnonsense\n");
        assert_eq!(read.details().collect::<Vec<_>>(), [("os:Linux", 2)]);
        assert!(read.visitors().is_empty());
    }
}
