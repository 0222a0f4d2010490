//! A minimal HTTP/1.1 client over one kept-alive loopback connection.
//!
//! Hand-written rather than ureq so that the load generator sees every
//! request as it happened: no hidden retry on a stale connection, no
//! redirect following, no connection pool deciding when to reconnect.

use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// One response, body read whole.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A client of one loopback port that keeps its connection between
/// requests and opens a new one only after an error or `Connection: close`.
pub struct Client {
    port: u16,
    timeout: Duration,
    conn: Option<BufReader<TcpStream>>,
}

impl Client {
    /// `timeout` bounds connecting and every read and write, so a hung
    /// server fails the test instead of hanging it.
    pub fn new(port: u16, timeout: Duration) -> Self {
        Self {
            port,
            timeout,
            conn: None,
        }
    }

    pub fn get(&mut self, path: &str) -> io::Result<Response> {
        self.exchange(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
    }

    pub fn post_json(
        &mut self,
        path: &str,
        headers: &[(&str, String)],
        body: &str,
    ) -> io::Result<Response> {
        let mut request = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n",
            body.len()
        );
        for (name, value) in headers {
            let _ = write!(request, "{name}: {value}\r\n");
        }
        request.push_str("\r\n");
        request.push_str(body);
        self.exchange(request.as_bytes())
    }

    fn exchange(&mut self, request: &[u8]) -> io::Result<Response> {
        let result = self.try_exchange(request);
        match &result {
            Ok(response)
                if !response
                    .header("connection")
                    .is_some_and(|v| v.eq_ignore_ascii_case("close")) => {}
            // After an error the stream may hold half a response: never reuse it.
            _ => self.conn = None,
        }
        result
    }

    fn try_exchange(&mut self, request: &[u8]) -> io::Result<Response> {
        if self.conn.is_none() {
            let address = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
            let stream = TcpStream::connect_timeout(&address, self.timeout)?;
            stream.set_read_timeout(Some(self.timeout))?;
            stream.set_write_timeout(Some(self.timeout))?;
            stream.set_nodelay(true)?;
            self.conn = Some(BufReader::new(stream));
        }
        let conn = self.conn.as_mut().expect("connected above");
        conn.get_mut().write_all(request)?;
        read_response(conn)
    }
}

fn read_response(conn: &mut BufReader<TcpStream>) -> io::Result<Response> {
    let status_line = read_line(conn)?;
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(format!("bad status line {status_line:?}")))?;
    let mut headers = Vec::new();
    loop {
        let line = read_line(conn)?;
        if line.is_empty() {
            break;
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| bad(format!("bad header {line:?}")))?;
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    let mut response = Response {
        status,
        headers,
        body: Vec::new(),
    };
    if let Some(length) = response.header("content-length") {
        let length: usize = length
            .parse()
            .map_err(|_| bad(format!("bad Content-Length {length:?}")))?;
        response.body.resize(length, 0);
        conn.read_exact(&mut response.body)?;
    } else if response
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        response.body = read_chunked(conn)?;
    } else if status >= 200 && status != 204 && status != 304 {
        return Err(bad("a response without a length".into()));
    }
    Ok(response)
}

fn read_chunked(conn: &mut BufReader<TcpStream>) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let size_line = read_line(conn)?;
        let size_hex = size_line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| bad(format!("bad chunk size {size_line:?}")))?;
        if size == 0 {
            // Trailers, then the blank line that ends the message.
            while !read_line(conn)?.is_empty() {}
            return Ok(body);
        }
        let start = body.len();
        body.resize(start + size, 0);
        conn.read_exact(&mut body[start..])?;
        read_line(conn)?;
    }
}

fn read_line(conn: &mut BufReader<TcpStream>) -> io::Result<String> {
    let mut line = String::new();
    if conn.read_line(&mut line)? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the server closed the connection",
        ));
    }
    Ok(line.trim_end_matches(['\r', '\n']).to_owned())
}

fn bad(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}
