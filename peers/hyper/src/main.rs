//! The contract (GET / → 200, GET /user/:id → the id, POST /user → 200) on hyper 1 with one
//! current-thread tokio runtime: one worker, as every server in `bench-runner peers` runs.
//! Port: `$PORT` (default 3000).

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

async fn route(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path();
    let user = path
        .strip_prefix("/user/")
        .filter(|id| !id.is_empty() && !id.contains('/'));
    let mut rsp = Response::new(Full::new(Bytes::new()));
    match (req.method(), path, user) {
        (&Method::GET, "/", _) | (&Method::POST, "/user", _) => {}
        (&Method::GET, _, Some(id)) => {
            *rsp.body_mut() = Full::new(Bytes::copy_from_slice(id.as_bytes()));
            rsp.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        }
        _ => *rsp.status_mut() = StatusCode::NOT_FOUND,
    }
    Ok(rsp)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let port: u16 = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(3000);
    let listener = TcpListener::bind(("0.0.0.0", port)).await?;
    eprintln!("peer-hyper listening on 0.0.0.0:{port}");
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        tokio::spawn(async move {
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service_fn(route))
                .await;
        });
    }
}
