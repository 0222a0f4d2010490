//! Tells Varnish to forget a key after a change, so nobody is sent to the
//! old target (or a 404 cached before the link existed) for a TTL; and
//! loads the hottest links into a new cache (`shortlink warm`).
//!
//! Requests go through lanes, one per thread that sends them: a task that
//! keeps one connection to Varnish and sends every request queued meanwhile
//! as one pipelined batch (HTTP/1.1 pipelining: all requests in one write,
//! the answers read back in order). Under load a batch carries many purges,
//! so Varnish wakes once per batch instead of once per insert; one request
//! per connection at a time cost the writer a third of its insert rate,
//! mostly in Varnish's context switches. The maintained Rust HTTP clients
//! (hyper and those built on it) send one request at a time per connection,
//! so the pipelining is written here; `httparse` reads the answers.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::ThreadId;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use url::Url;

use crate::config::Domain;

/// Why Varnish did not confirm a purge (or answer a warming request).
#[derive(Debug, Clone, thiserror::Error)]
pub enum PurgeError {
    #[error("Varnish at {address} did not answer the {method} within {timeout:?}")]
    Timeout {
        address: String,
        method: &'static str,
        timeout: Duration,
    },
    #[error("{method} to Varnish at {address} failed: {source}")]
    Io {
        address: String,
        method: &'static str,
        #[source]
        source: Arc<io::Error>,
    },
    #[error(
        "Varnish at {address} refused the PURGE with status {status}; \
         is this host in varnish.purge_acl, and varnish.purge_secret the same as in \
         the VCL Varnish loaded?"
    )]
    Refused { address: String, status: u16 },
    #[error("the purge lane stopped before Varnish answered; the writer is shutting down")]
    LaneStopped,
}

/// Where one short domain's links are asked for: the `Host` a request
/// names, so that Varnish routes it to the domain's links, and the path its
/// keys follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    host: Arc<str>,
    link_path: String,
}

impl Route {
    /// The route of `domain`'s links. The default domain's requests name
    /// `public_base_url`'s host and port, as before domains existed, so
    /// that they reach the links' VCL even when it answers only some hosts;
    /// another domain's name its canonical name, which the VCL routes by.
    pub fn of(domain: &Domain) -> Self {
        let host = if domain.is_default() {
            let base = &domain.base;
            base.host_str()
                .map_or_else(String::new, |host| match base.port() {
                    Some(port) => format!("{host}:{port}"),
                    None => host.to_owned(),
                })
        } else {
            domain.name.clone()
        };
        Self {
            host: host.into(),
            link_path: domain.link_path.clone(),
        }
    }
}

/// Sends `PURGE <link path><key>` to Varnish (`purge` waits for the
/// answer), and warming requests (`warm`), each with its domain's `Host`.
///
/// Each thread that sends gets a lane of its own, a task on that thread's
/// runtime: the writer runs one runtime per worker thread, and a lane on
/// the same thread as its callers is woken without a thread switch.
#[derive(Debug)]
pub struct Purger {
    /// `host:port` to connect to.
    address: String,
    /// The header lines every request carries after its `Host`: the purge
    /// secret, if there is one, each line led by CRLF.
    headers: String,
    timeout: Duration,
    lanes: Mutex<HashMap<ThreadId, mpsc::UnboundedSender<Job>>>,
}

/// Most requests sent in one batch; Varnish reads a batch into the
/// session's workspace, and 64 requests of under 100 bytes fit it easily.
const MAX_BATCH: usize = 64;

/// What a request asks of Varnish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Request {
    /// Forget the key.
    Purge,
    /// Fetch the key into the cache, as a request that is not a click.
    Warm,
}

impl Request {
    fn method(self) -> &'static str {
        match self {
            Self::Purge => "PURGE",
            Self::Warm => "GET",
        }
    }

    /// The request for `path` on `host`, appended to `out`.
    fn write(self, path: &str, host: &str, headers: &str, out: &mut Vec<u8>) {
        out.extend_from_slice(self.method().as_bytes());
        out.push(b' ');
        out.extend_from_slice(path.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        out.extend_from_slice(host.as_bytes());
        out.extend_from_slice(headers.as_bytes());
        if self == Self::Warm {
            // The VCL honours this from the purgers' addresses only.
            out.extend_from_slice(b"\r\nShortlink-Warm: 1");
        }
        out.extend_from_slice(b"\r\n\r\n");
    }
}

#[derive(Debug)]
struct Job {
    request: Request,
    host: Arc<str>,
    path: String,
    /// The answer's status.
    done: oneshot::Sender<Result<u16, PurgeError>>,
}

impl Purger {
    /// A purger of the Varnish at `url` (`http://host[:port]`, as the
    /// configuration checks it; `None` for a URL without a host).
    /// `timeout` bounds each batch, from its send to its last answer.
    /// `secret` is `varnish.purge_secret`, sent with every request when not
    /// empty.
    pub fn new(url: &str, secret: &str, timeout: Duration) -> Option<Self> {
        let mut headers = String::new();
        if !secret.is_empty() {
            headers.push_str("\r\nShortlink-Secret: ");
            headers.push_str(secret);
        }
        Some(Self {
            address: authority(url)?,
            headers,
            timeout,
            lanes: Mutex::new(HashMap::new()),
        })
    }

    /// A purger to the same Varnish with lanes (and so connections) of its
    /// own: Varnish answers a connection's requests one after another, so
    /// fetches that each wait for Redis go faster over several.
    #[must_use]
    pub fn sibling(&self) -> Self {
        Self {
            address: self.address.clone(),
            headers: self.headers.clone(),
            timeout: self.timeout,
            lanes: Mutex::new(HashMap::new()),
        }
    }

    /// Purges `key` of the domain `route` leads to, in the next batch this
    /// thread's lane sends. Must be called within a Tokio runtime, which the
    /// lane runs on.
    pub async fn purge(&self, route: &Route, key: &str) -> Result<(), PurgeError> {
        match self.send(Request::Purge, route, key).await? {
            200 => Ok(()),
            status => Err(PurgeError::Refused {
                address: self.address.clone(),
                status,
            }),
        }
    }

    /// Has Varnish fetch `key` into its cache without counting a click;
    /// returns the status Varnish answered (a redirect for a stored link).
    pub async fn warm(&self, route: &Route, key: &str) -> Result<u16, PurgeError> {
        self.send(Request::Warm, route, key).await
    }

    /// Sends `request` for `key` and waits for its answer.
    async fn send(&self, request: Request, route: &Route, key: &str) -> Result<u16, PurgeError> {
        let (done, answer) = oneshot::channel();
        let job = Job {
            request,
            host: Arc::clone(&route.host),
            path: format!("{}{key}", route.link_path),
            done,
        };
        self.enqueue(job);
        answer.await.map_err(|_| PurgeError::LaneStopped)?
    }

    /// Hands `job` to this thread's lane, starting one if there is none.
    fn enqueue(&self, job: Job) {
        let thread = std::thread::current().id();
        let mut lanes = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
        // A lane whose runtime has ended refuses the job: a new one takes it.
        let refused = match lanes.get(&thread) {
            Some(lane) => lane.send(job).err().map(|mpsc::error::SendError(job)| job),
            None => Some(job),
        };
        if let Some(job) = refused {
            let (lane, queue) = mpsc::unbounded_channel();
            tokio::spawn(run_lane(
                queue,
                self.address.clone(),
                self.headers.clone(),
                self.timeout,
            ));
            // The lane holds `queue` until `lane` is dropped: this cannot fail,
            // and if it did, the dropped job would answer `LaneStopped`.
            let _ = lane.send(job);
            lanes.insert(thread, lane);
        }
    }
}

/// Every Varnish node serving the links (`varnish.purge_urls`, or
/// `purge_url`), each reached through a [`Purger`] of its own; and the
/// route to each short domain's links on them.
#[derive(Debug)]
pub struct Nodes {
    nodes: Vec<(String, Purger)>,
    /// Each domain's canonical name and route, the default domain first.
    routes: Vec<(String, Route)>,
}

/// A node that did not confirm a purge, and why.
#[derive(Debug, Clone)]
pub struct Unconfirmed {
    pub node: String,
    pub error: PurgeError,
}

impl Nodes {
    /// `urls` are checked by the configuration (`http://host[:port]`), so
    /// each names a node; `domains` are the configuration's, the default
    /// one first; `secret` is `varnish.purge_secret`.
    pub fn new(urls: &[&str], domains: &[Domain], secret: &str, timeout: Duration) -> Self {
        Self {
            nodes: urls
                .iter()
                .filter_map(|&url| {
                    let purger = Purger::new(url, secret, timeout)?;
                    Some((url.to_owned(), purger))
                })
                .collect(),
            routes: domains
                .iter()
                .map(|domain| (domain.name.clone(), Route::of(domain)))
                .collect(),
        }
    }

    /// The route to the links of the domain named `name` (canonical); the
    /// default domain's for an empty name. `None` for a domain this
    /// writer's configuration does not have.
    pub fn route(&self, name: &str) -> Option<&Route> {
        if name.is_empty() {
            return self.routes.first().map(|(_, route)| route);
        }
        self.routes
            .iter()
            .find(|(domain, _)| domain == name)
            .map(|(_, route)| route)
    }

    /// Whether there is no node to purge.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Each node's URL, as configured, and its purger.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Purger)> {
        self.nodes
            .iter()
            .map(|(url, purger)| (url.as_str(), purger))
    }

    /// The purger of the node configured as `url`.
    pub fn node(&self, url: &str) -> Option<&Purger> {
        self.nodes
            .iter()
            .find(|(node, _)| node == url)
            .map(|(_, purger)| purger)
    }

    /// Purges `key` of the domain `route` leads to on every node at once,
    /// and returns the nodes that did not confirm it: a change waits for
    /// the slowest node, not their sum.
    pub async fn purge(&self, route: &Route, key: &str) -> Vec<Unconfirmed> {
        let answers = futures_util::future::join_all(
            self.nodes
                .iter()
                .map(|(_, purger)| purger.purge(route, key)),
        )
        .await;
        self.nodes
            .iter()
            .zip(answers)
            .filter_map(|((node, _), answer)| {
                answer.err().map(|error| Unconfirmed {
                    node: node.clone(),
                    error,
                })
            })
            .collect()
    }
}

/// `host:port` of a node's URL, as connected to and sent as `Host`.
fn authority(url: &str) -> Option<String> {
    let url = Url::parse(url).ok()?;
    let host = url.host_str()?;
    let port = url.port_or_known_default()?;
    Some(if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    })
}

/// The lane: takes whatever requests are queued, sends them as one batch,
/// and ends when the `Purger` is dropped.
async fn run_lane(
    mut queue: mpsc::UnboundedReceiver<Job>,
    address: String,
    headers: String,
    timeout: Duration,
) {
    let mut lane = Lane {
        address,
        headers,
        timeout,
        connection: None,
    };
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while queue.recv_many(&mut batch, MAX_BATCH).await > 0 {
        lane.send(&mut batch).await;
    }
}

struct Lane {
    address: String,
    headers: String,
    timeout: Duration,
    /// Kept between batches; Varnish may close it while idle.
    connection: Option<TcpStream>,
}

impl Lane {
    /// Answers every job in `batch`, leaving it empty.
    async fn send(&mut self, batch: &mut Vec<Job>) {
        let outcome = tokio::time::timeout(self.timeout, self.exchange(batch)).await;
        let method = batch.first().map_or("PURGE", |job| job.request.method());
        let error = match outcome {
            Ok(Ok(())) => return,
            Ok(Err(source)) => PurgeError::Io {
                address: self.address.clone(),
                method,
                source: Arc::new(source),
            },
            Err(_) => PurgeError::Timeout {
                address: self.address.clone(),
                method,
                timeout: self.timeout,
            },
        };
        self.connection = None;
        for job in batch.drain(..) {
            let _ = job.done.send(Err(error.clone()));
        }
    }

    /// Sends the jobs and answers each as its response arrives. A purge
    /// (or a warming fetch) changes nothing when repeated, so the ones a
    /// closed connection left unanswered are sent again on a new one; a new
    /// connection that answers nothing is an error.
    async fn exchange(&mut self, batch: &mut Vec<Job>) -> io::Result<()> {
        let mut requests = Vec::with_capacity(batch.len() * 64);
        let mut received = Vec::with_capacity(4096);
        while !batch.is_empty() {
            let fresh = self.connection.is_none();
            let mut stream = if let Some(stream) = self.connection.take() {
                stream
            } else {
                let stream = TcpStream::connect(self.address.as_str()).await?;
                stream.set_nodelay(true)?;
                stream
            };
            requests.clear();
            for job in batch.iter() {
                job.request
                    .write(&job.path, &job.host, &self.headers, &mut requests);
            }
            received.clear();
            let (answered, result) =
                read_answers(&mut stream, &requests, &mut received, batch.len()).await;
            let closed = result.is_err() || answered.iter().any(|answer| answer.closes);
            for (job, answer) in batch.drain(..answered.len()).zip(&answered) {
                let _ = job.done.send(Ok(answer.status));
            }
            if !closed {
                self.connection = Some(stream);
            }
            if let Err(error) = result {
                if fresh && answered.is_empty() {
                    return Err(error);
                }
            }
        }
        Ok(())
    }
}

/// One response: its status, and whether the connection ends after it.
struct Answer {
    status: u16,
    closes: bool,
}

/// Writes `requests` and reads up to `expected` responses into `received`,
/// stopping early at a response after which the connection cannot be reused. Returns the
/// responses read, and the error that stopped the reading, if one did.
async fn read_answers(
    stream: &mut TcpStream,
    requests: &[u8],
    received: &mut Vec<u8>,
    expected: usize,
) -> (Vec<Answer>, io::Result<()>) {
    let mut answered = Vec::with_capacity(expected);
    if let Err(error) = stream.write_all(requests).await {
        return (answered, Err(error));
    }
    let mut start = 0;
    while answered.len() < expected {
        match parse_answer(&received[start..]) {
            Ok(Some((answer, length))) => {
                start += length;
                let closes = answer.closes;
                answered.push(answer);
                if closes {
                    break;
                }
                continue;
            }
            Ok(None) => {}
            Err(error) => return (answered, Err(error)),
        }
        match stream.read_buf(received).await {
            Ok(0) => return (answered, Err(io::ErrorKind::UnexpectedEof.into())),
            Ok(_) => {}
            Err(error) => return (answered, Err(error)),
        }
    }
    (answered, Ok(()))
}

/// Parses one whole response at the start of `bytes`: the answer and its
/// length in bytes, or `None` when more bytes are needed.
fn parse_answer(bytes: &[u8]) -> io::Result<Option<(Answer, usize)>> {
    const MAX_HEAD: usize = 16 * 1024;
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    let head = match response.parse(bytes) {
        Ok(httparse::Status::Complete(head)) => head,
        Ok(httparse::Status::Partial) if bytes.len() <= MAX_HEAD => return Ok(None),
        Ok(httparse::Status::Partial) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "response head too long",
            ))
        }
        Err(error) => return Err(io::Error::new(io::ErrorKind::InvalidData, error)),
    };
    let status = response.code.unwrap_or_default();
    let header = |name: &str| {
        response
            .headers
            .iter()
            .find(|header| header.name.eq_ignore_ascii_case(name))
            .map(|header| header.value)
    };
    let length = match header("content-length") {
        Some(value) => std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad Content-Length"))?,
        None => 0,
    };
    // A body of unknown length (chunked, or up to the close) is not read:
    // the connection is given up after this answer instead.
    let closes = response.version == Some(0)
        || header("connection").is_some_and(|v| v.eq_ignore_ascii_case(b"close"))
        || header("transfer-encoding").is_some();
    if !closes && bytes.len() < head + length {
        return Ok(None);
    }
    Ok(Some((Answer { status, closes }, head + length)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_split_where_each_ends() {
        let first = b"HTTP/1.1 200 Purged\r\nContent-Length: 5\r\n\r\nhello";
        let second = b"HTTP/1.1 405 No\r\nContent-Length: 0\r\n\r\n";
        let both = [&first[..], &second[..]].concat();
        let (answer, length) = parse_answer(&both).unwrap().unwrap();
        assert_eq!(
            (answer.status, answer.closes, length),
            (200, false, first.len())
        );
        let (answer, length) = parse_answer(&both[length..]).unwrap().unwrap();
        assert_eq!(
            (answer.status, answer.closes, length),
            (405, false, second.len())
        );
    }

    #[test]
    fn an_unfinished_answer_waits_for_more() {
        assert!(parse_answer(b"HTTP/1.1 200 OK\r\nContent-Le")
            .unwrap()
            .is_none());
        assert!(
            parse_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn connection_close_and_unknown_lengths_end_the_connection() {
        let close = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
        assert!(parse_answer(close).unwrap().unwrap().0.closes);
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        assert!(parse_answer(chunked).unwrap().unwrap().0.closes);
        let old = b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n";
        assert!(parse_answer(old).unwrap().unwrap().0.closes);
    }

    #[test]
    fn each_domain_is_asked_for_under_its_own_host_and_path() {
        let config = toml::from_str(
            "public_base_url = \"http://127.0.0.1:6081/l/\"\n\
             [[domains]]\nbase_url = \"https://go.example/\"\naliases = [\"www.go.example\"]",
        )
        .unwrap();
        let settings = crate::config::Settings::new(config).unwrap();
        let nodes = Nodes::new(&[], &settings.domains, "s3cret", Duration::from_secs(1));
        let mut out = Vec::new();
        let default = nodes.route("").unwrap();
        assert_eq!(Some(default), nodes.route("127.0.0.1"));
        Request::Purge.write(
            &format!("{}Lm25", default.link_path),
            &default.host,
            "\r\nShortlink-Secret: s3cret",
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "PURGE /l/Lm25 HTTP/1.1\r\nHost: 127.0.0.1:6081\r\nShortlink-Secret: s3cret\r\n\r\n"
        );
        let go = nodes.route("go.example").unwrap();
        let mut out = Vec::new();
        Request::Warm.write(&format!("{}Lm25", go.link_path), &go.host, "", &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /Lm25 HTTP/1.1\r\nHost: go.example\r\nShortlink-Warm: 1\r\n\r\n"
        );
        assert!(
            nodes.route("www.go.example").is_none(),
            "canonical names only"
        );
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(parse_answer(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
    }
}
