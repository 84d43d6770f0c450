//! Requests a lenient parser would misread: each hides a request for `/user/hidden` where
//! such a parser would find one. The server must refuse each (its status, then the end of the
//! connection) and never answer the hidden one.

#[derive(Debug, Clone, Copy)]
pub enum Malformed {
    BareLfInExtension,
    LfInTrailer,
    TeOnHttp10,
    LengthAndChunked,
    BadLength,
    TwoHosts,
    NoHost,
    Gzip,
    Garbage,
    BadChunkData,
    BareLfInHead,
    EmptyExtensionName,
    NonAsciiTarget,
    UnknownMethod,
}

impl Malformed {
    pub const ALL: [Malformed; 14] = [
        Malformed::BareLfInExtension,
        Malformed::LfInTrailer,
        Malformed::TeOnHttp10,
        Malformed::LengthAndChunked,
        Malformed::BadLength,
        Malformed::TwoHosts,
        Malformed::NoHost,
        Malformed::Gzip,
        Malformed::Garbage,
        Malformed::BadChunkData,
        Malformed::BareLfInHead,
        Malformed::EmptyExtensionName,
        Malformed::NonAsciiTarget,
        Malformed::UnknownMethod,
    ];

    /// The request, with a request for `/user/hidden` smuggled where a lenient parser would
    /// find one.
    pub fn bytes(self) -> Vec<u8> {
        let hidden = "GET /user/hidden HTTP/1.1\r\nHost: t\r\n\r\n";
        match self {
            Malformed::BareLfInExtension => format!("POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n1;a\n{hidden}x\r\n0\r\n\r\n"),
            Malformed::LfInTrailer => format!("POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: 1\n{hidden}\r\n"),
            Malformed::TeOnHttp10 => format!("POST /user HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n{hidden}"),
            Malformed::LengthAndChunked => format!("POST /user HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n{hidden}"),
            Malformed::BadLength => format!("POST /user HTTP/1.1\r\nHost: t\r\nContent-Length: 1x\r\n\r\n{hidden}"),
            Malformed::TwoHosts => format!("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n{hidden}"),
            Malformed::NoHost => format!("GET / HTTP/1.1\r\n\r\n{hidden}"),
            Malformed::Gzip => format!("POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n{hidden}"),
            Malformed::Garbage => format!("NOT HTTP\r\n\r\n{hidden}"),
            Malformed::BadChunkData => format!("POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n{hidden}"),
            // A CRLF-only parser reads one field and serves what follows; an LF-accepting one
            // reads a length and takes it as a body: the two disagree on where it is.
            Malformed::BareLfInHead => format!("GET / HTTP/1.1\r\nHost: t\r\nDummy: x\nContent-Length: {}\r\n\r\n{hidden}", hidden.len()),
            Malformed::EmptyExtensionName => format!("POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n2;\r\nab\r\n0\r\n\r\n{hidden}"),
            Malformed::NonAsciiTarget => format!("GET /δ HTTP/1.1\r\nHost: t\r\n\r\n{hidden}"),
            Malformed::UnknownMethod => format!("MKCOLA / HTTP/1.1\r\nHost: t\r\n\r\n{hidden}"),
        }
        .into_bytes()
    }

    pub fn status(self) -> u16 {
        match self {
            Malformed::Gzip | Malformed::UnknownMethod => 501,
            _ => 400,
        }
    }
}
