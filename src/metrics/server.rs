//! The endpoint: hyper serving `GET /metrics` (HTTP/1) on a thread of its own, from the store it was given, which
//! the session's hub (or a replay's player) folds into as it goes. The thread runs its own single-threaded runtime,
//! like the hub's and the ticker's, so that nothing a scraper does reaches the session's threads. Hostile clients
//! are bounded: a request's head must arrive whole within `HEADER_READ_TIMEOUT` (a slowloris is cut off then, however
//! slowly it trickles) and be at most `MAX_REQUEST_BYTES`; a connection lives `CONNECTION_DEADLINE` at most (a
//! scraper that never reads its answer); at most `MAX_CONNECTIONS` are served at once, past which the oldest is
//! dropped for the newest, so a crowd of idle clients cannot keep a real scrape waiting nor grow golow's memory. A
//! scrape locks the store only to render it; the answer is written after.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::oneshot;

use super::exposition::{self, KernelNames};
use crate::store::Store;

/// How long a client may take to send its request's head, however it trickles it.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a connection lives in all: its request, then its answer taken (a client that never reads is dropped).
const CONNECTION_DEADLINE: Duration = Duration::from_secs(10);

/// Connections served at once: a few KB each. Past it the oldest is dropped for the newest.
const MAX_CONNECTIONS: usize = 256;

/// After a failed accept (out of descriptors, say), the listener waits this long before the next, rather than spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// A request's head longer than this is not a scrape (431).
const MAX_REQUEST_BYTES: usize = 8 * 1024;

/// The text format's media type (Prometheus's 0.0.4, which OpenMetrics scrapers accept).
const CONTENT_TYPE: HeaderValue =
    HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8");

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
    /// Dropped to stop the listener.
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Endpoint {
    /// Listens on `addr` and serves what `store` holds; `hostname` labels the GPUs' series.
    pub fn start(addr: SocketAddr, hostname: String, store: Store) -> Result<Endpoint, String> {
        let listener = TcpListener::bind(addr).map_err(|e| bind_error(addr, &e))?;
        let addr = listener.local_addr().map_err(|e| bind_error(addr, &e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| bind_error(addr, &e))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the metrics endpoint: {e}"))?;
        let served = Arc::new(Served {
            store,
            hostname: hostname.into(),
            kernels: Mutex::default(),
        });
        make_room_for_connections();
        let (stop, stopped) = oneshot::channel();
        // The runtime ends with the thread, and every connection's task with it.
        let thread = std::thread::Builder::new()
            .name("golow-metrics".into())
            .spawn(move || runtime.block_on(serve(listener, served, stopped)))
            .map_err(|e| format!("cannot start the metrics endpoint's thread: {e}"))?;
        Ok(Endpoint {
            addr,
            stop: Some(stop),
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
        drop(self.stop.take());
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

/// Raises golow's soft limit on open files by `MAX_CONNECTIONS`, as far as the hard limit allows, so that the
/// endpoint's connections do not take the descriptors the session counted on (its share was set before the endpoint
/// starts).
fn make_room_for_connections() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    // `None` is no limit.
    let limit = getrlimit(Resource::Nofile);
    let Some(current) = limit.current else { return };
    let raised = Rlimit {
        current: Some(
            current
                .saturating_add(MAX_CONNECTIONS as u64)
                .min(limit.maximum.unwrap_or(u64::MAX)),
        ),
        ..limit
    };
    // Raising the soft limit up to the hard one is always permitted; a failure leaves the limit as it was.
    let _ = setrlimit(Resource::Nofile, raised);
}

/// What a scrape renders: the store's state, labelled with the host's name, and the kernels its scrapes named since
/// the store's state was last started afresh (a counter's series must not come and go between scrapes of one
/// session).
struct Served {
    store: Store,
    hostname: Box<str>,
    kernels: Mutex<(u64, KernelNames)>,
}

impl Served {
    fn render(&self) -> String {
        let folded = self.store.lock();
        let mut kernels = self.kernels.lock().unwrap_or_else(PoisonError::into_inner);
        let (generation, names) = &mut *kernels;
        if *generation != folded.generation() {
            *generation = folded.generation();
            *names = KernelNames::default();
        }
        exposition::render(&folded, &self.hostname, names)
    }
}

/// Accepts connections until `stopped`, serving up to `MAX_CONNECTIONS` at once.
async fn serve(listener: TcpListener, served: Arc<Served>, mut stopped: oneshot::Receiver<()>) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let http = http1_server();
    // Oldest first: when full, the connection that has waited longest makes room.
    let mut open: VecDeque<tokio::task::JoinHandle<()>> = VecDeque::new();
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => accepted,
        };
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
        let served = served.clone();
        let scrape = service_fn(move |request| {
            let response = answer(&request, &served);
            async move { Ok::<_, Infallible>(response) }
        });
        let connection = http.serve_connection(TokioIo::new(stream), scrape);
        open.push_back(tokio::spawn(async move {
            let _ = tokio::time::timeout(CONNECTION_DEADLINE, connection).await;
        }));
    }
}

/// HTTP/1 as a scrape needs it: one request a connection (the answer says `Connection: close`); the head within
/// `HEADER_READ_TIMEOUT` and `MAX_REQUEST_BYTES` (431 past it, 400 for what is not HTTP); a client that shuts its
/// sending side once it has asked still gets its answer.
fn http1_server() -> http1::Builder {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_header_size(MAX_REQUEST_BYTES)
        .keep_alive(false)
        .half_close(true);
    http
}

/// The answer to one request: the exposition for a GET (or HEAD, whose body hyper leaves out) of /metrics, 404
/// elsewhere, 405 for any other method.
fn answer(request: &Request<Incoming>, served: &Served) -> Response<String> {
    let read = matches!(*request.method(), Method::GET | Method::HEAD);
    let (status, body) = match (read, request.uri().path()) {
        (true, "/metrics") => (StatusCode::OK, served.render()),
        (true, _) => (StatusCode::NOT_FOUND, "golow serves /metrics only\n".into()),
        (false, _) => (StatusCode::METHOD_NOT_ALLOWED, "GET /metrics\n".into()),
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, CONTENT_TYPE);
    if status == StatusCode::METHOD_NOT_ALLOWED {
        headers.insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
    }
    response
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Instant;

    use golow_protocol::event::{Body, Record};
    use golow_protocol::samples;

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

    /// An endpoint on a port the system chose, serving three steps of one worker.
    fn endpoint() -> Endpoint {
        let store = Store::default();
        for n in 0..3 {
            let step = Body::Step(samples::step(n, 10.0, n == 0));
            store
                .lock()
                .apply(&Record::new(n as f64, Some("libtorch".into()), step));
        }
        Endpoint::start("127.0.0.1:0".parse().unwrap(), "node-1".into(), store).unwrap()
    }

    /// What golow answers to `request`, sent as it is: the head and the body.
    fn exchange(addr: SocketAddr, request: &[u8]) -> (String, String) {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        stream.write_all(request).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        (head.to_string(), body.to_string())
    }

    fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
        head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }

    #[test]
    fn only_a_get_or_head_of_metrics_is_a_scrape() {
        let endpoint = endpoint();
        let ask = |request: &str| exchange(endpoint.addr(), request.as_bytes());
        let status = |request: &str| ask(request).0.lines().next().unwrap().to_string();

        let (head, body) = ask("GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n");
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert_eq!(
            header(&head, "content-type"),
            Some("text/plain; version=0.0.4; charset=utf-8")
        );
        assert_eq!(header(&head, "connection"), Some("close"));
        assert!(
            body.contains(r#"golow_steps_total{worker="libtorch"} 3"#),
            "{body}"
        );
        let length = body.len().to_string();
        assert_eq!(header(&head, "content-length"), Some(length.as_str()));

        assert_eq!(
            status("GET /metrics?x=1 HTTP/1.0\r\n\r\n"),
            "HTTP/1.0 200 OK"
        );
        let (head, nothing) = ask("HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert_eq!(header(&head, "content-length"), Some(length.as_str()));
        assert_eq!(nothing, "");

        let (head, body) = ask("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(head.starts_with("HTTP/1.1 404 Not Found\r\n"), "{head}");
        assert_eq!(body, "golow serves /metrics only\n");
        let (head, body) = ask("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
        assert!(
            head.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
            "{head}"
        );
        assert_eq!(header(&head, "allow"), Some("GET, HEAD"));
        assert_eq!(body, "GET /metrics\n");
        assert_eq!(status("\u{1b}[2J\r\n\r\n"), "HTTP/1.1 400 Bad Request");
        let endless = format!(
            "GET /metrics HTTP/1.1\r\nX: {}",
            "a".repeat(MAX_REQUEST_BYTES)
        );
        let endless = &endless[..MAX_REQUEST_BYTES];
        assert_eq!(
            status(endless),
            "HTTP/1.1 431 Request Header Fields Too Large"
        );
    }

    /// A client that shuts its sending side once it has asked (as `nc -N` does) still gets its answer.
    #[test]
    fn a_client_that_stops_sending_after_asking_is_answered() {
        let endpoint = endpoint();
        let mut stream = TcpStream::connect(endpoint.addr()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        stream.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        stream.shutdown(std::net::Shutdown::Write).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.0 200 OK\r\n"), "{answer}");
    }

    /// Whether golow has closed `stream`: its end read (or reset), not merely nothing to read yet.
    fn closed(stream: &mut TcpStream) -> bool {
        let mut byte = [0u8];
        match stream.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
        }
    }

    /// A slowloris, a byte of its head every half second, and a client that says nothing are both cut off by the
    /// header-read timeout (2 s), long before the slowloris would finish, and a scrape is answered meanwhile.
    #[test]
    fn a_slow_or_silent_client_is_cut_off() {
        let endpoint = endpoint();
        let mut silent = TcpStream::connect(endpoint.addr()).unwrap();
        let mut slow = TcpStream::connect(endpoint.addr()).unwrap();
        for stream in [&silent, &slow] {
            stream
                .set_read_timeout(Some(Duration::from_millis(10)))
                .unwrap();
        }
        let start = Instant::now();
        let head = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX: ".iter();
        let mut trickled = 0;
        for byte in head.chain(std::iter::repeat(&b'a')).take(60) {
            if slow.write_all(&[*byte]).is_err() || closed(&mut slow) {
                break;
            }
            trickled += 1;
            std::thread::sleep(Duration::from_millis(500));
        }
        assert!(
            trickled < 60,
            "a slowloris still connected after {:?}",
            start.elapsed()
        );
        let status = exchange(endpoint.addr(), b"GET /metrics HTTP/1.0\r\n\r\n").0;
        assert!(status.starts_with("HTTP/1.0 200 OK"), "{status}");
        silent
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        assert!(closed(&mut silent), "a silent client still connected");
    }

    /// Once the endpoint is dropped, nothing of it is left: its connections closed, its port no longer listening.
    #[test]
    fn nothing_outlives_the_endpoint() {
        let endpoint = endpoint();
        let addr = endpoint.addr();
        let mut held = TcpStream::connect(addr).unwrap();
        held.write_all(b"GET /met").unwrap();
        // Served: the connection is golow's, not the listener's backlog's.
        assert!(
            exchange(addr, b"GET /metrics HTTP/1.0\r\n\r\n")
                .0
                .contains("200 OK")
        );
        drop(endpoint);
        held.set_nonblocking(true).unwrap();
        assert!(closed(&mut held), "a connection outlived the endpoint");
        assert!(TcpStream::connect(addr).is_err(), "{addr} still listens");
    }
}
