//! Script arguments packed in one buffer: a flush of fresh links seals
//! tens of arguments per link, and a `String` each (with its count's
//! formatting and the copies into batches) made allocation and freeing
//! nearly half of the flusher's time (`perf`, 20,000 fresh links a flush).

use std::ops::Range;

/// A run of arguments, each a byte string, end to end in one buffer.
#[derive(Default, Debug, Clone, PartialEq, Eq)]
pub(super) struct Args {
    bytes: Vec<u8>,
    /// Where each argument ends in `bytes`.
    ends: Vec<usize>,
}

impl Args {
    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(super) fn push(&mut self, arg: &str) {
        self.push_parts(&[arg]);
    }

    /// One argument made of `parts`, one after another.
    pub(super) fn push_parts(&mut self, parts: &[&str]) {
        for part in parts {
            self.bytes.extend_from_slice(part.as_bytes());
        }
        self.ends.push(self.bytes.len());
    }

    pub(super) fn push_number(&mut self, n: u64) {
        self.bytes
            .extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        self.ends.push(self.bytes.len());
    }

    /// `bytes` in lowercase hexadecimal, as one argument.
    pub(super) fn push_hex(&mut self, bytes: &[u8]) {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        for byte in bytes {
            self.bytes.push(DIGITS[usize::from(byte >> 4)]);
            self.bytes.push(DIGITS[usize::from(byte & 0xf)]);
        }
        self.ends.push(self.bytes.len());
    }

    /// A field (or member) and its count: two arguments.
    pub(super) fn push_pair(&mut self, field: &[&str], n: u64) {
        self.push_parts(field);
        self.push_number(n);
    }

    /// Appends `other`'s arguments in `range`.
    pub(super) fn extend_from(&mut self, other: &Self, range: Range<usize>) {
        if range.is_empty() {
            return;
        }
        let start = other.start(range.start);
        let end = other.ends[range.end - 1];
        let shift = self.bytes.len();
        self.bytes.extend_from_slice(&other.bytes[start..end]);
        self.ends
            .extend(other.ends[range].iter().map(|e| e - start + shift));
    }

    fn start(&self, index: usize) -> usize {
        index.checked_sub(1).map_or(0, |before| self.ends[before])
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &[u8]> {
        (0..self.len()).map(|i| &self.bytes[self.start(i)..self.ends[i]])
    }

    /// The arguments as text (each was pushed as text).
    #[cfg(test)]
    pub(super) fn texts(&self) -> impl Iterator<Item = &str> {
        self.iter()
            .map(|arg| std::str::from_utf8(arg).unwrap_or_default())
    }
}

impl redis::ToRedisArgs for Args {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        for arg in self.iter() {
            out.write_arg(arg);
        }
    }

    fn num_of_args(&self) -> usize {
        self.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_keep_their_bounds_through_copies() {
        let mut args = Args::default();
        args.push("h");
        args.push_parts(&["browser", ":", "Firefox"]);
        args.push_number(1_234);
        args.push_hex(&[0x0a, 0xff]);
        args.push("");
        args.push_pair(&["25"], 7);
        let texts: Vec<&str> = args.texts().collect();
        assert_eq!(
            texts,
            ["h", "browser:Firefox", "1234", "0aff", "", "25", "7"]
        );
        let mut copy = Args::default();
        copy.push("first");
        copy.extend_from(&args, 1..4);
        copy.extend_from(&args, 4..4);
        copy.extend_from(&args, 4..7);
        let copied: Vec<&str> = copy.texts().collect();
        assert_eq!(
            copied,
            ["first", "browser:Firefox", "1234", "0aff", "", "25", "7"]
        );
        assert_eq!(copy.len(), 7);
    }
}
