//! Which of the contract's routes a request's method and target select.

/// The contract's routes, as a request's method and path select them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Route<Id> {
    /// `GET /`, `POST /user`: 200, empty body.
    Empty,
    /// `GET /user/:id`: 200, the id as `text/plain`.
    User(Id),
    NotFound,
}

/// The path of a request target: origin-form as it is, absolute-form (`http://host/path`,
/// RFC 9112 §3.2.2: a server MUST accept it) without its scheme and authority.
pub(super) fn origin_path(target: &str) -> &str {
    let b = target.as_bytes();
    let scheme = if b.len() >= 7 && b[..7].eq_ignore_ascii_case(b"http://") {
        7
    } else if b.len() >= 8 && b[..8].eq_ignore_ascii_case(b"https://") {
        8
    } else {
        return target;
    };
    let rest = &target[scheme..];
    match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => &rest[i..],
        // No path (`http://host` or `http://host?q`): the path is `/`.
        _ => "/",
    }
}

pub(super) fn route<'a>(method: &str, target: &'a str) -> Route<&'a str> {
    // A byte loop: paths are short, and `split('?')`'s searcher costs ~50 instructions on `/`.
    let path = match target.bytes().position(|b| b == b'?') {
        Some(i) => &target[..i],
        None => target,
    };
    match (method, path) {
        ("GET" | "HEAD", "/") | ("POST", "/user") => Route::Empty,
        ("GET" | "HEAD", p) => match p.strip_prefix("/user/") {
            Some(id) if !id.is_empty() && !id.contains('/') => Route::User(id),
            _ => Route::NotFound,
        },
        _ => Route::NotFound,
    }
}
