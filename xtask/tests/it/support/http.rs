//! A real HTTP/1.1 server on 127.0.0.1 that serves what a test tells it to,
//! misbehaves on request (5xx, 404, truncation, stalls, trickles, redirects) and
//! counts the requests per path. It stops when dropped.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the server answers at a path.
#[derive(Clone)]
pub(crate) enum Reply {
    /// 200 with these bytes.
    Bytes(Vec<u8>),
    /// 500 for the first `failures` requests, then 200 with the bytes.
    FailThen { failures: usize, body: Vec<u8> },
    /// This status, empty body.
    Status(u16),
    /// A `Content-Length` of `claimed` and only `body`, then close.
    Truncate { body: Vec<u8>, claimed: usize },
    /// The headers and half of `body`, then silence until the server stops
    /// (or a minute passes).
    Stall(Vec<u8>),
    /// 200 with these bytes and no `Content-Length`: the body ends when the
    /// connection closes.
    Unsized(Vec<u8>),
    /// 302 to this location (a path or a full URL).
    Redirect(String),
    /// 200 with the whole body's `Content-Length`, then one byte of it
    /// every `every` (until the server stops).
    Trickle { body: Vec<u8>, every: Duration },
}

#[derive(Default)]
struct State {
    routes: HashMap<String, Reply>,
    hits: HashMap<String, usize>,
}

pub(crate) struct Server {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub(crate) fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1");
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (state, stop) = (state.clone(), stop.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let (state, stop) = (state.clone(), stop.clone());
                    std::thread::spawn(move || serve(conn, &state, &stop));
                }
            })
        };
        Server {
            addr,
            state,
            stop,
            thread: Some(thread),
        }
    }

    pub(crate) fn route(&self, path: &str, reply: Reply) -> &Server {
        self.state
            .lock()
            .unwrap()
            .routes
            .insert(path.to_owned(), reply);
        self
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Requests seen at `path`.
    pub(crate) fn hits(&self, path: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .hits
            .get(path)
            .copied()
            .unwrap_or(0)
    }

    /// Requests seen at any path.
    pub(crate) fn total_hits(&self) -> usize {
        self.state.lock().unwrap().hits.values().sum()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(mut conn: TcpStream, state: &Mutex<State>, stop: &AtomicBool) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head);
    let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let reply = {
        let mut state = state.lock().unwrap();
        let count = {
            let hits = state.hits.entry(path.clone()).or_insert(0);
            *hits += 1;
            *hits
        };
        match state.routes.get(&path).cloned() {
            Some(Reply::FailThen { failures, body }) if count > failures => Reply::Bytes(body),
            Some(Reply::FailThen { .. }) => Reply::Status(500),
            Some(other) => other,
            None => Reply::Status(404),
        }
    };
    let headers = |status: &str, length: usize, extra: &str| {
        format!("HTTP/1.1 {status}\r\nContent-Length: {length}\r\nConnection: close\r\n{extra}\r\n")
    };
    let _ = match reply {
        Reply::Bytes(body) => conn
            .write_all(headers("200 OK", body.len(), "").as_bytes())
            .and_then(|()| conn.write_all(&body)),
        Reply::Status(code) => {
            let reason = match code {
                404 => "Not Found",
                500 => "Internal Server Error",
                503 => "Service Unavailable",
                _ => "Status",
            };
            conn.write_all(headers(&format!("{code} {reason}"), 0, "").as_bytes())
        }
        Reply::Truncate { body, claimed } => conn
            .write_all(headers("200 OK", claimed, "").as_bytes())
            .and_then(|()| conn.write_all(&body)),
        Reply::Stall(body) => {
            let sent = conn
                .write_all(headers("200 OK", body.len(), "").as_bytes())
                .and_then(|()| conn.write_all(&body[..body.len() / 2]))
                .and_then(|()| conn.flush());
            let until = Instant::now() + Duration::from_secs(60);
            while !stop.load(Ordering::SeqCst) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            sent
        }
        Reply::Unsized(body) => conn
            .write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
            .and_then(|()| conn.write_all(&body)),
        Reply::Trickle { body, every } => {
            let mut sent = conn.write_all(headers("200 OK", body.len(), "").as_bytes());
            for byte in body {
                let until = Instant::now() + every;
                while !stop.load(Ordering::SeqCst) && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(10));
                }
                if stop.load(Ordering::SeqCst) || sent.is_err() {
                    break;
                }
                sent = conn.write_all(&[byte]).and_then(|()| conn.flush());
            }
            sent
        }
        Reply::Redirect(to) => {
            conn.write_all(headers("302 Found", 0, &format!("Location: {to}\r\n")).as_bytes())
        }
        Reply::FailThen { .. } => unreachable!("resolved above"),
    };
    let _ = conn.flush();
}
