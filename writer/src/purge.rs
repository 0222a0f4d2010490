//! Tells Varnish to forget a key after an insert, so a 404 cached before the
//! link existed does not linger for the negative TTL.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;
use url::Url;

/// Sends `PURGE <link path><key>` to Varnish; `None` when purging is off.
#[derive(Debug, Clone)]
pub struct Purger {
    target: Option<(String, String)>,
    link_path: String,
    timeout: Duration,
}

impl Purger {
    /// `purge_url` is checked by the configuration: empty or `http://host[:port]`.
    pub fn new(purge_url: &str, link_path: &str, timeout: Duration) -> Self {
        let target = Url::parse(purge_url).ok().and_then(|url| {
            let host = url.host_str()?.to_owned();
            let port = url.port_or_known_default()?;
            let authority = if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            };
            Some((authority.clone(), authority))
        });
        Self {
            target,
            link_path: link_path.to_owned(),
            timeout,
        }
    }

    /// Purges `key`; the error says why Varnish did not confirm it.
    pub async fn purge(&self, key: &str) -> Result<(), String> {
        let Some((address, host)) = &self.target else {
            return Ok(());
        };
        let request = format!(
            "PURGE {}{key} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n",
            self.link_path
        );
        let exchange = async {
            let mut stream = TcpStream::connect(address.as_str()).await?;
            stream.write_all(request.as_bytes()).await?;
            let mut head = [0u8; 64];
            let mut filled = 0;
            while filled < 12 {
                let n = stream.read(&mut head[filled..]).await?;
                if n == 0 {
                    break;
                }
                filled += n;
            }
            Ok::<_, std::io::Error>(String::from_utf8_lossy(&head[..filled]).into_owned())
        };
        let head = timeout(self.timeout, exchange)
            .await
            .map_err(|_| format!("Varnish at {address} did not answer the PURGE in time"))?
            .map_err(|e| format!("PURGE to Varnish at {address} failed: {e}"))?;
        match head.get(9..12) {
            Some("200") => Ok(()),
            _ => Err(format!(
                "Varnish at {address} refused the PURGE: {:?}; is this host in varnish.purge_acl?",
                head.lines().next().unwrap_or_default()
            )),
        }
    }
}
