//! Tells Varnish to forget a key after an insert, so a 404 cached before the
//! link existed does not linger for the negative TTL.

use std::collections::HashMap;
use std::io;
use std::sync::{Mutex, PoisonError};
use std::thread::ThreadId;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;
use url::Url;

/// Sends `PURGE <link path><key>` to Varnish over kept-alive connections.
///
/// A new TCP connection per insert cost the writer two thirds of its insert
/// rate, so connections are kept and reused. Each is tied to the I/O driver
/// of the runtime that opened it, and the writer runs one runtime per worker
/// thread, so idle connections are kept per thread.
#[derive(Debug)]
pub struct Purger {
    /// `host:port` to connect to, sent as `Host` too; `None` when purging is off.
    authority: Option<String>,
    link_path: String,
    timeout: Duration,
    idle: Mutex<HashMap<ThreadId, Vec<TcpStream>>>,
}

/// Idle connections kept per thread, enough for its concurrent inserts.
const MAX_IDLE_PER_THREAD: usize = 32;

impl Purger {
    /// `purge_url` is checked by the configuration: empty or `http://host[:port]`.
    pub fn new(purge_url: &str, link_path: &str, timeout: Duration) -> Self {
        let authority = Url::parse(purge_url).ok().and_then(|url| {
            let host = url.host_str()?.to_owned();
            let port = url.port_or_known_default()?;
            Some(if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            })
        });
        Self {
            authority,
            link_path: link_path.to_owned(),
            timeout,
            idle: Mutex::new(HashMap::new()),
        }
    }

    /// Purges `key`; the error says why Varnish did not confirm it.
    pub async fn purge(&self, key: &str) -> Result<(), String> {
        let Some(address) = &self.authority else {
            return Ok(());
        };
        let request = format!(
            "PURGE {}{key} HTTP/1.1\r\nHost: {address}\r\n\r\n",
            self.link_path
        );
        let attempt = async {
            // A kept connection may have been closed by Varnish meanwhile:
            // then the purge is sent again on a new one.
            if let Some(mut stream) = self.take_idle() {
                if let Ok(answer) = exchange(&mut stream, &request).await {
                    return Ok((stream, answer));
                }
            }
            let mut stream = TcpStream::connect(address.as_str()).await?;
            stream.set_nodelay(true)?;
            let answer = exchange(&mut stream, &request).await?;
            Ok::<_, io::Error>((stream, answer))
        };
        let (stream, answer) = timeout(self.timeout, attempt)
            .await
            .map_err(|_| format!("Varnish at {address} did not answer the PURGE in time"))?
            .map_err(|e| format!("PURGE to Varnish at {address} failed: {e}"))?;
        if answer.keep_alive {
            self.keep_idle(stream);
        }
        if answer.status == 200 {
            Ok(())
        } else {
            Err(format!(
                "Varnish at {address} refused the PURGE with status {}; \
                 is this host in varnish.purge_acl?",
                answer.status
            ))
        }
    }

    fn take_idle(&self) -> Option<TcpStream> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.get_mut(&std::thread::current().id())?.pop()
    }

    fn keep_idle(&self, stream: TcpStream) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = idle.entry(std::thread::current().id()).or_default();
        if kept.len() < MAX_IDLE_PER_THREAD {
            kept.push(stream);
        }
    }
}

struct Answer {
    status: u16,
    keep_alive: bool,
}

/// Sends `request` and reads the whole response, so the connection can
/// carry the next one.
async fn exchange(stream: &mut TcpStream, request: &str) -> io::Result<Answer> {
    stream.write_all(request.as_bytes()).await?;
    let mut buffer = Vec::with_capacity(512);
    let head_end = loop {
        if let Some(end) = find(&buffer, b"\r\n\r\n") {
            break end + 4;
        }
        if buffer.len() > 16 * 1024 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "response head too long",
            ));
        }
        let mut chunk = [0u8; 1024];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
    let status = head
        .get(9..12)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no status line"))?;
    let header = |name: &str| {
        head.lines()
            .find_map(|line| line.strip_prefix(name).map(|value| value.trim().to_owned()))
    };
    let length: usize = header("content-length:")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let keep_alive = header("connection:").is_none_or(|v| v != "close")
        && header("transfer-encoding:").is_none();
    let mut body_read = buffer.len() - head_end;
    while body_read < length {
        let mut chunk = [0u8; 1024];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        body_read += n;
    }
    Ok(Answer {
        status,
        keep_alive: keep_alive && body_read == length,
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}
