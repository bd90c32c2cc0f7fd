//! A real S3-compatible server on loopback (moto's server mode, from the
//! test virtual environment), with fake credentials and no cloud lookups,
//! and a few plain HTTP calls to set it up and look inside.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use crate::tools::tool;

/// A running moto server; killed when dropped.
#[derive(Debug)]
pub struct S3Server {
    child: Child,
    /// `http://127.0.0.1:PORT`: the S3 API and plain HTTP reads alike.
    pub endpoint: String,
    /// The server's request log, a line a request.
    log: Arc<Mutex<Vec<String>>>,
}

impl S3Server {
    /// Starts a server on a free loopback port and waits until it listens.
    pub fn start() -> S3Server {
        let mut child = tool("moto_server")
            .args(["-H", "127.0.0.1", "-p", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("moto_server (crates/kpack-test-support/requirements.txt) starts");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let endpoint = loop {
            let line = match lines.next() {
                Some(line) => line.unwrap(),
                None => panic!("moto_server exited before it listened"),
            };
            if let Some(at) = line.find("Running on http://") {
                break line[at + "Running on ".len()..].trim().to_owned();
            }
        };
        // Keep reading, so the server never blocks on a full pipe.
        let log = Arc::new(Mutex::new(Vec::new()));
        let kept = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                kept.lock().unwrap().push(line);
            }
        });
        S3Server {
            child,
            endpoint,
            log,
        }
    }

    /// Creates `bucket`, readable by anyone (as a bucket behind a CDN is).
    pub fn create_bucket(&self, bucket: &str) {
        let (status, body) = self.request("PUT", &format!("/{bucket}"), &[]);
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let policy = format!(
            r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":"*","Action":["s3:GetObject","s3:ListBucket","s3:ListBucketMultipartUploads"],"Resource":["arn:aws:s3:::{bucket}","arn:aws:s3:::{bucket}/*"]}}]}}"#
        );
        let (status, body) = self.request("PUT", &format!("/{bucket}?policy"), policy.as_bytes());
        assert!(status < 300, "{status}: {}", String::from_utf8_lossy(&body));
    }

    /// The plain HTTP(S) URL of `bucket/prefix`, as a CDN would serve it.
    pub fn http_url(&self, bucket: &str, prefix: &str) -> String {
        format!("{}/{bucket}/{prefix}", self.endpoint)
    }

    /// Sets the environment `kpack-repo` needs to reach this server: fake
    /// credentials, a region, the endpoint, and no instance-metadata lookup
    /// (no request may leave loopback).
    pub fn env<'a>(&self, command: &'a mut Command) -> &'a mut Command {
        for variable in ["AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE"] {
            command.env_remove(variable);
        }
        command
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ENDPOINT_URL", &self.endpoint)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    }

    /// The keys in `bucket` under `prefix`, sorted.
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut path = format!("/{bucket}?list-type=2&prefix={prefix}");
            if let Some(token) = &token {
                path.push_str(&format!("&continuation-token={}", encode(token)));
            }
            let (status, body) = self.request("GET", &path, &[]);
            let text = String::from_utf8(body).unwrap();
            assert_eq!(status, 200, "{text}");
            keys.extend(elements(&text, "Key"));
            token = elements(&text, "NextContinuationToken").into_iter().next();
            if token.is_none() {
                break;
            }
        }
        keys.sort();
        keys
    }

    /// The bytes at `bucket/key`, or `None`.
    pub fn get(&self, bucket: &str, key: &str) -> Option<Vec<u8>> {
        let (status, body) = self.request("GET", &format!("/{bucket}/{key}"), &[]);
        (status == 200).then_some(body)
    }

    /// The response headers of a GET of `bucket/key` (moto refuses an
    /// anonymous HEAD that a bucket policy allows), lowercased names.
    pub fn head(&self, bucket: &str, key: &str) -> Vec<(String, String)> {
        let (status, head, _) = self.exchange("GET", &format!("/{bucket}/{key}"), &[]);
        assert_eq!(status, 200, "{bucket}/{key}");
        head
    }

    /// The paths of the successful GETs logged so far that start with
    /// `prefix` (`/bucket/key`), in order.
    pub fn gets(&self, prefix: &str) -> Vec<String> {
        let needle = format!("\"GET {prefix}");
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter_map(|line| {
                let at = line.find(&needle)?;
                let request = &line[at + 1..];
                let path = request.split(' ').nth(1)?;
                let status = line[at..].split('"').nth(2)?.split_whitespace().next()?;
                (status == "200" || status == "206").then(|| path.to_owned())
            })
            .collect()
    }

    /// The multipart uploads begun and neither completed nor aborted.
    pub fn open_uploads(&self, bucket: &str) -> Vec<String> {
        let (status, body) = self.request("GET", &format!("/{bucket}?uploads"), &[]);
        let text = String::from_utf8(body).unwrap();
        assert_eq!(status, 200, "{text}");
        elements(&text, "UploadId")
    }

    /// One HTTP/1.1 request, unsigned (moto accepts them): status and body.
    pub fn request(&self, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
        let (status, _, body) = self.exchange(method, path, body);
        (status, body)
    }

    fn exchange(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> (u16, Vec<(String, String)>, Vec<u8>) {
        let address = self.endpoint.trim_start_matches("http://");
        let mut stream = TcpStream::connect(address).unwrap();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .unwrap();
        stream.write_all(body).unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).unwrap();
        parse_response(&response)
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn parse_response(response: &[u8]) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let end = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP response");
    let head = String::from_utf8_lossy(&response[..end]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_lowercase(), value.trim().to_owned()))
        .collect();
    let mut body = response[end + 4..].to_vec();
    if headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"))
    {
        body = dechunk(&body);
    }
    (status, headers, body)
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n").unwrap();
        let size_text = String::from_utf8_lossy(&data[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        data = &data[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

/// The texts of every `<name>…</name>` element.
fn elements(xml: &str, name: &str) -> Vec<String> {
    let (open, close) = (format!("<{name}>"), format!("</{name}>"));
    xml.split(&open)
        .skip(1)
        .filter_map(|rest| rest.split_once(&close).map(|(text, _)| text.to_owned()))
        .collect()
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
