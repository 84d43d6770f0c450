//! The contract (GET / → 200, GET /user/:id → the id, POST /user → 200) on may_minihttp with
//! one may worker. Port: `$PORT` (default 3000).

use std::io;

use may_minihttp::{HttpService, HttpServiceFactory, Request, Response};

#[derive(Clone)]
struct Contract;

impl HttpService for Contract {
    fn call(&mut self, req: Request, rsp: &mut Response) -> io::Result<()> {
        let path = req.path();
        let user = path
            .strip_prefix("/user/")
            .filter(|id| !id.is_empty() && !id.contains('/'));
        match (req.method(), path, user) {
            ("GET", "/", _) | ("POST", "/user", _) => {}
            ("GET", _, Some(id)) => {
                rsp.header("Content-Type: text/plain");
                rsp.body_mut().extend_from_slice(id.as_bytes());
            }
            _ => {
                rsp.status_code(404, "Not Found");
            }
        }
        Ok(())
    }
}

struct Factory;

impl HttpServiceFactory for Factory {
    type Service = Contract;

    fn new_service(&self, _: usize) -> Contract {
        Contract
    }
}

fn main() {
    let port: u16 = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(3000);
    may::config().set_workers(1);
    let server = Factory
        .start(format!("0.0.0.0:{port}"))
        .unwrap_or_else(|e| panic!("binding port {port}: {e}"));
    eprintln!("peer-may-minihttp listening on 0.0.0.0:{port}");
    server.join().expect("server thread");
}
