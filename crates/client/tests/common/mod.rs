//! A scripted HTTP/1.1 endpoint on a loopback socket: it records every request and answers each
//! as the test's script says (an answer, a dropped connection, a stall), one request per
//! connection.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A request as received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// Names lowercased, in order of arrival.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the endpoint does with a request.
pub enum Reply {
    /// Answer with this status and JSON body.
    Answer(u16, String),
    /// Close the connection without answering (the request was read: it may have acted).
    Drop,
    /// Answer nothing for this long, then close.
    Stall(Duration),
}

pub type Log = Arc<Mutex<Vec<Seen>>>;

/// Starts the endpoint; `script(n, request)` decides the `n`th request's reply (from 0).
pub async fn serve<F>(script: F) -> (String, Log)
where
    F: Fn(usize, &Seen) -> Reply + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let log: Log = Arc::default();
    let script = Arc::new(script);
    let seen = log.clone();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let (script, seen) = (script.clone(), seen.clone());
            tokio::spawn(async move { handle(socket, &*script, &seen).await });
        }
    });
    (url, log)
}

async fn handle<F: Fn(usize, &Seen) -> Reply>(mut socket: TcpStream, script: &F, log: &Log) {
    let Some(request) = read_request(&mut socket).await else {
        return;
    };
    let n = {
        let mut log = log.lock().expect("log");
        log.push(request.clone());
        log.len() - 1
    };
    match script(n, &request) {
        Reply::Answer(status, body) => {
            let head = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(body.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
        Reply::Drop => drop(socket),
        Reply::Stall(d) => {
            tokio::time::sleep(d).await; // the server's side of a client timeout
            drop(socket);
        }
    }
}

async fn read_request(socket: &mut TcpStream) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_owned(), first.next()?.to_owned());
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Seen {
        method,
        path,
        headers,
        body,
    })
}

pub const TX: &str = "1c8fb081-2300-58c5-8504-1a636c82a882";

/// A transaction answer's body.
pub fn answer(status: &str) -> String {
    format!(
        r#"{{"txId":"{TX}","status":"{status}","participants":[{{"participant":"accounts","key":{{"id":"alice"}},"vote":"yes","mode":"reserved"}}]}}"#
    )
}
