//! The line numbers of a CSV file's records, told from the bytes read.

use std::collections::VecDeque;
use std::io::Read;

/// Counts the line ends of what passes through, so that a record's line
/// can be told from its first byte: the csv crate's own line numbers go
/// wrong after CRLF line ends and blank lines. Holds only the line ends
/// read ahead of the last record asked about.
pub(super) struct LineCounter<R> {
    inner: R,
    /// Bytes read so far.
    read: u64,
    /// Where the line ends not yet passed are (`\n`), and whether a `\r`
    /// came right before each.
    ends: VecDeque<(u64, bool)>,
    /// Line ends passed.
    passed: u64,
    /// Whether the last byte read was `\r`.
    last_was_cr: bool,
}

impl<R> LineCounter<R> {
    pub(super) fn new(inner: R) -> Self {
        Self {
            inner,
            read: 0,
            ends: VecDeque::new(),
            passed: 0,
            last_was_cr: false,
        }
    }

    /// The line (from 1) of the record starting at `byte`, which must not
    /// be before the last one asked about. A record the reader places on
    /// the blank lines before it is placed after them.
    pub(super) fn line_at(&mut self, mut byte: u64) -> u64 {
        while let Some(&(at, _)) = self.ends.front() {
            let blank = at == byte || (at == byte + 1 && self.ends[0].1);
            if at >= byte && !blank {
                break;
            }
            if blank {
                byte = at + 1;
            }
            self.ends.pop_front();
            self.passed += 1;
        }
        self.passed + 1
    }
}

impl<R: Read> Read for LineCounter<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        for (i, &b) in buf[..n].iter().enumerate() {
            if b == b'\n' {
                let after_cr = if i == 0 {
                    self.last_was_cr
                } else {
                    buf[i - 1] == b'\r'
                };
                self.ends.push_back((self.read + i as u64, after_cr));
            }
        }
        if n > 0 {
            self.last_was_cr = buf[n - 1] == b'\r';
        }
        self.read += n as u64;
        Ok(n)
    }
}
