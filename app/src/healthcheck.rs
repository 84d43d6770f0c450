//! `server --healthcheck [URL]`: scratch images have no curl, so the binary checks itself.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Returns the process exit code: 0 when GET answers 2xx, 1 otherwise (with the reason on
/// stderr), 2 for a URL it cannot use.
pub fn run(url: Option<&str>) -> i32 {
    let default;
    let url = match url {
        Some(u) => u,
        None => {
            let port = std::env::var("APP_PORT").unwrap_or_else(|_| "3000".into());
            default = format!("http://127.0.0.1:{port}/");
            &default
        }
    };
    let Some((host, path)) = split_url(url) else {
        eprintln!("server --healthcheck: '{url}' is not an http://host[:port][/path] URL");
        return 2;
    };
    match check(&host, &path) {
        Ok(status) if (200..300).contains(&status) => 0,
        Ok(status) => {
            eprintln!("server --healthcheck: {url} answered {status}");
            1
        }
        Err(e) => {
            eprintln!("server --healthcheck: {url}: {e}");
            1
        }
    }
}

fn split_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("http://")?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if host.is_empty() {
        return None;
    }
    let host = if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:80")
    };
    Some((host, path.to_string()))
}

fn check(host: &str, path: &str) -> std::io::Result<u16> {
    let addr = host
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other("no address"))?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head)?;
    // "HTTP/1.1 200"
    std::str::from_utf8(&head[9..12])
        .ok()
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other("not an HTTP response"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            split_url("http://127.0.0.1:3000/"),
            Some(("127.0.0.1:3000".into(), "/".into()))
        );
        assert_eq!(
            split_url("http://localhost"),
            Some(("localhost:80".into(), "/".into()))
        );
        assert_eq!(
            split_url("http://h:1/user/1"),
            Some(("h:1".into(), "/user/1".into()))
        );
        assert_eq!(split_url("https://h/"), None);
        assert_eq!(split_url("http:///x"), None);
    }
}
