//! What to load: the URL, the duration syntax wrk accepts, and the requests to send.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TargetError {
    #[error("'{0}' is not an http:// URL (expected http://host[:port][/path])")]
    BadUrl(String),
    #[error("cannot resolve host '{0}'")]
    Resolve(String),
    #[error("'{0}' is not a duration (expected e.g. 10s, 500ms, 2m, 1h or a number of seconds)")]
    BadDuration(String),
    #[error("'{0}' is not a route (expected METHOD:/path, e.g. GET:/user/0)")]
    BadRoute(String),
}

#[derive(Debug, Clone)]
pub struct Url {
    pub addr: SocketAddr,
    /// `host[:port]` as written, for the Host header.
    pub authority: String,
    pub path: String,
    /// As given, for the report.
    pub text: String,
}

impl Url {
    pub fn parse(text: &str) -> Result<Url, TargetError> {
        let bad = || TargetError::BadUrl(text.to_string());
        let rest = text.strip_prefix("http://").ok_or_else(bad)?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(bad());
        }
        let with_port = if authority
            .rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        {
            authority.to_string()
        } else if authority.contains(':') && !authority.ends_with(']') {
            return Err(bad()); // a port that is not a number
        } else {
            format!("{authority}:80")
        };
        let addr = with_port
            .to_socket_addrs()
            .map_err(|_| TargetError::Resolve(authority.to_string()))?
            .next()
            .ok_or_else(|| TargetError::Resolve(authority.to_string()))?;
        Ok(Url {
            addr,
            authority: authority.to_string(),
            path: path.to_string(),
            text: text.to_string(),
        })
    }
}

/// wrk's duration syntax (`10s`, `2m`, `1h`, bare seconds), plus `ms`.
pub fn parse_duration(s: &str) -> Result<Duration, TargetError> {
    let bad = || TargetError::BadDuration(s.to_string());
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(bad()),
    };
    if !secs.is_finite() || secs <= 0.0 {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(secs))
}

/// wrk's way of printing a duration in the "Running 10s test" line.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 3600.0 && s % 3600.0 == 0.0 {
        format!("{}h", s / 3600.0)
    } else if s >= 60.0 && s % 60.0 == 0.0 {
        format!("{}m", s / 60.0)
    } else if s.fract() == 0.0 {
        format!("{s}s")
    } else {
        format!("{}ms", (s * 1000.0).round())
    }
}

/// One request shape in the mix: `METHOD:/path` on the command line, in raw.json and in every
/// table (one spelling, parsed and printed here only).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Route {
    pub method: String,
    pub path: String,
}

impl Route {
    /// `GET /`.
    pub fn get_root() -> Route {
        Route {
            method: "GET".into(),
            path: "/".into(),
        }
    }
}

/// `GET /`, the-benchmarker's first route.
impl Default for Route {
    fn default() -> Route {
        Route::get_root()
    }
}

impl std::str::FromStr for Route {
    type Err = TargetError;

    fn from_str(r: &str) -> Result<Route, TargetError> {
        let (method, path) = r
            .split_once(':')
            .ok_or_else(|| TargetError::BadRoute(r.to_string()))?;
        let method = method.trim().to_ascii_uppercase();
        let path = path.trim();
        if method.is_empty()
            || !method.bytes().all(|b| b.is_ascii_uppercase())
            || !path.starts_with('/')
        {
            return Err(TargetError::BadRoute(r.to_string()));
        }
        Ok(Route {
            method,
            path: path.to_string(),
        })
    }
}

impl std::fmt::Display for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.method, self.path)
    }
}

impl serde::Serialize for Route {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Route {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Route, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// `GET:/,GET:/user/0,POST:/user`
pub fn parse_routes(s: &str) -> Result<Vec<Route>, TargetError> {
    s.split(',').map(str::parse).collect()
}

/// The bytes of each route's request, rendered once before the run.
pub fn render_requests(
    url: &Url,
    routes: &[Route],
    headers: &[String],
    body: &[u8],
    close: bool,
) -> Vec<Vec<u8>> {
    routes
        .iter()
        .map(|r| {
            let mut req = format!(
                "{} {} HTTP/1.1\r\nHost: {}\r\n",
                r.method, r.path, url.authority
            );
            let sets = |name: &str| {
                headers.iter().any(|h| {
                    h.split_once(':')
                        .is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case(name))
                })
            };
            for h in headers {
                req.push_str(h.trim());
                req.push_str("\r\n");
            }
            // A header the user gave wins over the one a mode would add.
            if close && !sets("connection") {
                req.push_str("Connection: close\r\n");
            }
            let with_body = !body.is_empty() || r.method == "POST" || r.method == "PUT";
            if with_body && !sets("content-length") {
                req.push_str(&format!("Content-Length: {}\r\n", body.len()));
            }
            req.push_str("\r\n");
            let mut bytes = req.into_bytes();
            if with_body {
                bytes.extend_from_slice(body);
            }
            bytes
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_prints_as_it_parses_and_travels_in_json_as_that_string() {
        for text in ["GET:/", "POST:/user", "HEAD:/user/0"] {
            let r: Route = text.parse().unwrap();
            assert_eq!(r.to_string(), text);
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(json, format!("\"{text}\""));
            assert_eq!(serde_json::from_str::<Route>(&json).unwrap(), r);
        }
        assert_eq!("get:/".parse::<Route>().unwrap(), Route::get_root());
        assert!(serde_json::from_str::<Route>("\"nonsense\"").is_err());
    }

    #[test]
    fn urls() {
        let u = Url::parse("http://127.0.0.1:3000/user/1").unwrap();
        assert_eq!(
            (u.addr.port(), u.path.as_str(), u.authority.as_str()),
            (3000, "/user/1", "127.0.0.1:3000")
        );
        assert_eq!(Url::parse("http://127.0.0.1").unwrap().addr.port(), 80);
        assert_eq!(Url::parse("http://127.0.0.1:3000").unwrap().path, "/");
        for bad in [
            "127.0.0.1:3000",
            "https://x/",
            "http:///",
            "http://h:port/",
            "http://u@h/",
        ] {
            assert!(
                matches!(Url::parse(bad), Err(TargetError::BadUrl(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn durations_like_wrk() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        for bad in ["", "s", "10x", "-1s", "0", "ten"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(format_duration(Duration::from_secs(10)), "10s");
        assert_eq!(format_duration(Duration::from_secs(120)), "2m");
        assert_eq!(format_duration(Duration::from_millis(2500)), "2500ms");
    }

    #[test]
    fn routes_and_requests() {
        let routes = parse_routes("GET:/,get:/user/0,POST:/user").unwrap();
        assert_eq!(
            routes[1],
            Route {
                method: "GET".into(),
                path: "/user/0".into()
            }
        );
        assert!(parse_routes("GET/").is_err());
        assert!(parse_routes("GET:user").is_err());
        let url = Url::parse("http://127.0.0.1:9/").unwrap();
        let reqs = render_requests(&url, &routes, &["X-A: 1".into()], b"", false);
        assert_eq!(
            reqs[0],
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1:9\r\nX-A: 1\r\n\r\n"
        );
        assert_eq!(
            reqs[2],
            b"POST /user HTTP/1.1\r\nHost: 127.0.0.1:9\r\nX-A: 1\r\nContent-Length: 0\r\n\r\n"
        );
        let with_body = render_requests(&url, &routes[2..], &[], b"hi", false);
        assert!(with_body[0].ends_with(b"Content-Length: 2\r\n\r\nhi"));
    }

    #[test]
    fn a_connection_per_request_asks_for_the_close_unless_a_header_says_otherwise() {
        let url = Url::parse("http://127.0.0.1:9/").unwrap();
        let routes = parse_routes("GET:/").unwrap();
        let close = render_requests(&url, &routes, &[], b"", true);
        assert_eq!(
            close[0],
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1:9\r\nConnection: close\r\n\r\n"
        );
        let own = render_requests(&url, &routes, &["connection: keep-alive".into()], b"", true);
        let text = String::from_utf8(own[0].clone()).unwrap();
        assert_eq!(
            text.to_ascii_lowercase().matches("connection:").count(),
            1,
            "{text}"
        );
    }
}
