//! The endpoint: a listener on its own thread that answers `GET /metrics` with the exposition of the store it was
//! given, which the session's hub (or a replay's player) folds into as it goes. Connections are served concurrently on the thread's own async runtime, up to
//! `MAX_CONNECTIONS`; past it the oldest is dropped for the newest, so a crowd of idle or trickling clients (a
//! slowloris, a port scanner, a stuck proxy) cannot keep a real scrape waiting. Each connection has 2 s in all to
//! send its request and take the answer. A scrape locks the store only to render it; the answer is written after.

use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::exposition::{self, KernelNames};
use crate::store::Store;

/// How long a scraper may take, in all, to send its request and take the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);

/// Connections served at once: a few KB each, and well within the open files a session leaves the endpoint.
const MAX_CONNECTIONS: usize = 256;

/// After a failed accept (out of descriptors, say), the listener waits this long before the next, rather than spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// A request's head longer than this is not a scrape.
const MAX_REQUEST_BYTES: usize = 8 * 1024;

/// The text format's media type (Prometheus's 0.0.4, which OpenMetrics scrapers accept).
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `--metrics-addr`: `HOST:PORT`, or a port alone (or `:PORT`) on the loopback interface, so that nothing is exposed
/// beyond this machine unless asked.
pub fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    let port_only = text.strip_prefix(':').unwrap_or(text);
    if let Ok(port) = port_only.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    let bad = || {
        format!(
            "--metrics-addr '{text}': expected HOST:PORT or a port, e.g. 127.0.0.1:9400 or 9400"
        )
    };
    text.to_socket_addrs()
        .map_err(|_| bad())?
        .next()
        .ok_or_else(bad)
}

/// The endpoint, serving until dropped.
pub struct Endpoint {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Endpoint {
    /// Listens on `addr` and serves what `store` holds; `hostname` labels the GPUs' series.
    pub fn start(addr: SocketAddr, hostname: String, store: Store) -> Result<Endpoint, String> {
        let listener = TcpListener::bind(addr).map_err(|e| bind_error(addr, &e))?;
        let addr = listener.local_addr().map_err(|e| bind_error(addr, &e))?;
        let served = Arc::new(Served {
            store,
            kernels: Mutex::default(),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the metrics endpoint: {e}"))?;
            listener
                .set_nonblocking(true)
                .map_err(|e| bind_error(addr, &e))?;
            std::thread::Builder::new()
                .name("golow-metrics".into())
                .spawn(move || runtime.block_on(serve(listener, served, stop, hostname.into())))
                .map_err(|e| format!("cannot start the metrics endpoint's thread: {e}"))?
        };
        Ok(Endpoint {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// Where it listens (the port the system chose, for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // The listener waits in accept: a connection of our own wakes it to see the flag.
        let _ = TcpStream::connect_timeout(&self.addr, CLIENT_TIMEOUT);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn bind_error(addr: SocketAddr, e: &io::Error) -> String {
    let why = match e.kind() {
        io::ErrorKind::AddrInUse => {
            "the port is in use: choose another, or 0 for any free one".to_string()
        }
        io::ErrorKind::AddrNotAvailable => "the address is not one of this machine's".into(),
        io::ErrorKind::PermissionDenied => {
            "permission denied (ports below 1024 need privileges)".into()
        }
        _ => e.to_string(),
    };
    format!("--metrics-addr {addr}: cannot listen: {why}")
}

/// What a scrape renders: the store's state, and the kernels its scrapes named since the store's state was last
/// started afresh (a counter's series must not come and go between scrapes of one session).
struct Served {
    store: Store,
    kernels: Mutex<(u64, KernelNames)>,
}

impl Served {
    fn render(&self, hostname: &str) -> String {
        let folded = self.store.lock();
        let mut kernels = self.kernels.lock().unwrap_or_else(PoisonError::into_inner);
        let (generation, names) = &mut *kernels;
        if *generation != folded.generation() {
            *generation = folded.generation();
            *names = KernelNames::default();
        }
        exposition::render(&folded, hostname, names)
    }
}

async fn serve(
    listener: TcpListener,
    served: Arc<Served>,
    stop: Arc<AtomicBool>,
    hostname: Arc<str>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    // Oldest first: when full, the connection that has waited longest makes room.
    let mut open: VecDeque<tokio::task::JoinHandle<()>> = VecDeque::new();
    loop {
        let accepted = listener.accept().await;
        if stop.load(Ordering::SeqCst) {
            open.iter().for_each(tokio::task::JoinHandle::abort);
            return;
        }
        let Ok((stream, _)) = accepted else {
            tokio::time::sleep(ACCEPT_BACKOFF).await;
            continue;
        };
        open.retain(|connection| !connection.is_finished());
        if open.len() >= MAX_CONNECTIONS
            && let Some(oldest) = open.pop_front()
        {
            oldest.abort();
        }
        let (served, hostname) = (served.clone(), hostname.clone());
        open.push_back(tokio::spawn(async move {
            let _ = tokio::time::timeout(CLIENT_TIMEOUT, answer(stream, &served, &hostname)).await;
        }));
    }
}

/// One connection: its request read and its answer written (within `CLIENT_TIMEOUT` in all, which the caller
/// keeps), then closed.
async fn answer(
    mut stream: tokio::net::TcpStream,
    served: &Served,
    hostname: &str,
) -> io::Result<()> {
    let route = match read_head(&mut stream).await? {
        Some(head) => route(&head),
        None => Route::TooLong,
    };
    let (status, body) = match route {
        Route::Metrics { .. } => {
            // The store is locked only to render; the answer is written after.
            let text = served.render(hostname);
            ("200 OK", text)
        }
        Route::NotFound => ("404 Not Found", "golow serves /metrics only\n".into()),
        Route::BadMethod => ("405 Method Not Allowed", "GET /metrics\n".into()),
        Route::BadRequest => ("400 Bad Request", String::new()),
        Route::TooLong => ("431 Request Header Fields Too Large", String::new()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    if route != (Route::Metrics { head_only: true }) {
        stream.write_all(body.as_bytes()).await?;
    }
    stream.shutdown().await
}

/// The request's head, up to its blank line (or the client's end of sending); `None` past `MAX_REQUEST_BYTES`.
async fn read_head(stream: &mut tokio::net::TcpStream) -> io::Result<Option<Vec<u8>>> {
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_REQUEST_BYTES {
            return Ok(None);
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..n]);
    }
    Ok(Some(head))
}

#[derive(Debug, PartialEq)]
enum Route {
    Metrics { head_only: bool },
    NotFound,
    BadMethod,
    BadRequest,
    TooLong,
}

fn route(head: &[u8]) -> Route {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let Ok(line) = std::str::from_utf8(line) else {
        return Route::BadRequest;
    };
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return Route::BadRequest;
    };
    let path = target.split('?').next().unwrap_or_default();
    match (method, path) {
        ("GET", "/metrics") => Route::Metrics { head_only: false },
        ("HEAD", "/metrics") => Route::Metrics { head_only: true },
        ("GET" | "HEAD", _) => Route::NotFound,
        _ => Route::BadMethod,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_defaults_to_the_loopback_interface() {
        assert_eq!(parse_addr("9400"), Ok("127.0.0.1:9400".parse().unwrap()));
        assert_eq!(parse_addr(":9400"), Ok("127.0.0.1:9400".parse().unwrap()));
        assert_eq!(parse_addr("0.0.0.0:80"), Ok("0.0.0.0:80".parse().unwrap()));
        assert_eq!(parse_addr("[::1]:9400"), Ok("[::1]:9400".parse().unwrap()));
        for bad in ["", "x", "127.0.0.1", "127.0.0.1:99999"] {
            let why = parse_addr(bad).unwrap_err();
            assert!(why.contains("expected HOST:PORT"), "{bad}: {why}");
        }
    }

    #[test]
    fn only_a_get_or_head_of_metrics_is_a_scrape() {
        let route = |head: &str| route(head.as_bytes());
        assert_eq!(
            route("GET /metrics HTTP/1.1\r\nAccept: text/plain\r\n\r\n"),
            Route::Metrics { head_only: false }
        );
        assert_eq!(
            route("GET /metrics?x=1 HTTP/1.0\r\n\r\n"),
            Route::Metrics { head_only: false }
        );
        assert_eq!(
            route("HEAD /metrics HTTP/1.1\r\n\r\n"),
            Route::Metrics { head_only: true }
        );
        assert_eq!(route("GET / HTTP/1.1\r\n\r\n"), Route::NotFound);
        assert_eq!(route("POST /metrics HTTP/1.1\r\n\r\n"), Route::BadMethod);
        assert_eq!(route(""), Route::BadRequest);
        assert_eq!(route("\u{1b}[2J"), Route::BadRequest);
    }
}
