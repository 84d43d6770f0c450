//! The framing state machine and the contract, request by request.

use super::route::origin_path;
use super::*;

const DATE: &str = "Mon, 30 Nov 2026 16:00:00 GMT";
const LIMITS: Limits = Limits { max_body: 1024 };

fn stamp() -> Stamp {
    Stamp::new(DATE.into())
}

fn run(input: &[u8]) -> (String, Progress) {
    let mut out = Vec::new();
    let p = Connection::default().process(input, &mut out, &stamp(), LIMITS);
    (String::from_utf8(out).unwrap(), p)
}

fn statuses(out: &str) -> Vec<&str> {
    out.split("HTTP/1.1 ").skip(1).map(|r| &r[..3]).collect()
}

#[test]
fn routes() {
    let (out, p) = run(b"GET /user/42 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(p.requests, 1);
    assert!(out.starts_with("HTTP/1.1 200 OK\r\nDate: Mon, 30 Nov 2026 16:00:00 GMT\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\n42"), "{out}");
    assert_eq!(
        statuses(&run(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").0),
        ["200"]
    );
    assert_eq!(
        statuses(&run(b"POST /user HTTP/1.1\r\nHost: t\r\n\r\n").0),
        ["200"]
    );
    for raw in [
        "GET /\u{3b4} ",
        "GET /user/\u{e9} ",
        "GET http://a/\u{3b4} ",
    ] {
        let req = format!("{raw}HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(
            answers(req.as_bytes()),
            (vec!["400".to_string()], After::Close),
            "{raw}"
        );
    }
    for miss in [
        "GET /user/ ",
        "GET /user/1/2 ",
        "GET /users ",
        "POST / ",
        "PUT /user ",
        "GET /user ",
        "DELETE /user/1 ",
        "OPTIONS * ",
    ] {
        let req = format!("{miss}HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(statuses(&run(req.as_bytes()).0), ["404"], "{miss}");
    }
    // A method no RFC defines: 501, and nothing after it is answered.
    for method in ["MKCOLA", "ANNOUNCE", "get", "BREW"] {
        let req =
            format!("{method} / HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(
            answers(req.as_bytes()),
            (vec!["501".to_string()], After::Close),
            "{method}"
        );
    }
    // A framing fault is still a 400 whatever the method.
    assert_eq!(
        statuses(&run(b"BREW / HTTP/1.1\r\n\r\n").0),
        ["400"],
        "no Host"
    );
    assert_eq!(
        run(b"GET /user/7?x=1 HTTP/1.1\r\nHost: t\r\n\r\n")
            .0
            .rsplit("\r\n\r\n")
            .next(),
        Some("7")
    );
}

/// The prebuilt answer (`Stamp`) is byte for byte the one the general path writes, and is
/// used only where its Connection header (none) is right.
#[test]
fn the_empty_answers_are_exact_on_every_version_and_close() {
    let date = "Date: Mon, 30 Nov 2026 16:00:00 GMT\r\n";
    let ok = |connection: &str| {
        format!("HTTP/1.1 200 OK\r\n{date}Content-Length: 0\r\n{connection}\r\n")
    };
    for (request, answer) in [
        ("GET / HTTP/1.1\r\nHost: t\r\n\r\n", ok("")),
        ("HEAD / HTTP/1.1\r\nHost: t\r\n\r\n", ok("")),
        ("POST /user HTTP/1.1\r\nHost: t\r\n\r\n", ok("")),
        (
            "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
            ok("Connection: close\r\n"),
        ),
        (
            "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            ok("Connection: keep-alive\r\n"),
        ),
        ("GET / HTTP/1.0\r\n\r\n", ok("Connection: close\r\n")),
        (
            "POST /user HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi",
            ok(""),
        ),
    ] {
        assert_eq!(run(request.as_bytes()).0, answer, "{request:?}");
    }
    assert_eq!(stamp().ok_empty, ok("").as_bytes());
}

#[test]
fn keep_alive_rules() {
    assert_eq!(
        run(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").1.after,
        After::KeepAlive
    );
    let (out, p) = run(
        b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    assert_eq!(
        (p.after, p.requests, statuses(&out).len()),
        (After::Close, 1, 1)
    );
    assert!(out.contains("Connection: close"));
    assert_eq!(run(b"GET / HTTP/1.0\r\n\r\n").1.after, After::Close);
    let (out, p) = run(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
    assert_eq!(p.after, After::KeepAlive);
    assert!(out.contains("Connection: keep-alive"));
}

#[test]
fn bodies_are_skipped_so_the_next_request_parses() {
    let (out, p) = run(
        b"POST /user HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhelloGET /user/9 HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    assert_eq!((p.requests, statuses(&out)), (2, vec!["200", "200"]));
    assert!(out.ends_with("9"));
    let input = b"POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n";
    let (out, p) = run(input);
    assert_eq!(
        (p.requests, statuses(&out).len(), p.consumed),
        (2, 2, input.len())
    );
}

#[test]
fn a_request_split_anywhere_is_reassembled() {
    let input =
        b"POST /user HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabcGET /user/5 HTTP/1.1\r\nHost: t\r\n\r\n";
    for split in 1..input.len() {
        let mut conn = Connection::default();
        let mut buf = Vec::new();
        let mut out = Vec::new();
        let mut requests = 0;
        for piece in input.chunks(split) {
            buf.extend_from_slice(piece);
            let p = conn.process(&buf, &mut out, &stamp(), LIMITS);
            requests += p.requests;
            buf.drain(..p.consumed);
        }
        assert_eq!(requests, 2, "split {split}");
        assert!(buf.is_empty());
    }
}

#[test]
fn refusals_close() {
    for (input, status) in [
        (&b"GARBAGE\r\n\r\n"[..], "400"),
        (b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\n\r\n", "400"),
        (
            b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "400",
        ),
        (
            b"POST /user HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "400",
        ),
        (
            b"POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n",
            "501",
        ),
        (
            b"POST /user HTTP/1.1\r\nHost: t\r\nContent-Length: 99999\r\n\r\n",
            "413",
        ),
        (
            b"POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n",
            "413",
        ),
        (
            b"POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "400",
        ),
    ] {
        let (out, p) = run(input);
        assert_eq!(
            statuses(&out).last(),
            Some(&status),
            "{}",
            String::from_utf8_lossy(input)
        );
        assert_eq!(p.after, After::Close);
        assert!(out.contains("Connection: close"));
    }
    let big = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nX: {}\r\n\r\n",
        "a".repeat(MAX_HEAD)
    );
    assert_eq!(statuses(&run(big.as_bytes()).0), ["431"]);
    let partial = format!("GET / HTTP/1.1\r\nHost: t\r\nX: {}", "a".repeat(MAX_HEAD));
    assert_eq!(statuses(&run(partial.as_bytes()).0), ["431"]);
    let many: String = (0..100).map(|i| format!("X{i}: 1\r\n")).collect();
    assert_eq!(
        statuses(&run(format!("GET / HTTP/1.1\r\nHost: t\r\n{many}\r\n").as_bytes()).0),
        ["431"]
    );
}

#[test]
fn expect_continue_gets_an_interim_response_only_while_the_body_is_missing() {
    let mut conn = Connection::default();
    let mut out = Vec::new();
    let head =
        b"POST /user HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
    let p = conn.process(head, &mut out, &stamp(), LIMITS);
    assert_eq!(p.requests, 0);
    assert_eq!(
        out, b"HTTP/1.1 100 Continue\r\n\r\n",
        "the final answer waits for the body"
    );
    let p = conn.process(b"hi", &mut out, &stamp(), LIMITS);
    assert_eq!(p.requests, 1);
    assert!(
        std::str::from_utf8(&out).unwrap().ends_with("\r\n\r\n")
            && out.windows(15).any(|w| w == b"HTTP/1.1 200 OK")
    );
    let (out, _) = run(
        b"POST /user HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi",
    );
    assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
}

/// The statuses a whole input gets, and how the connection ends.
fn answers(input: &[u8]) -> (Vec<String>, After) {
    let (out, p) = run(input);
    (
        statuses(&out).into_iter().map(String::from).collect(),
        p.after,
    )
}

/// The class, not the case: in each of these heads, every one of its CRLFs turned into a
/// bare LF (alone, and all at once) gets one 400 and a close — never the 200 of a head read
/// by LF, never a second answer for what follows.
#[test]
fn a_bare_lf_anywhere_in_the_head_is_one_400_and_a_close() {
    let heads = [
        "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET /user/1 HTTP/1.1\r\nHost: a\r\nDummy: x\r\nContent-Length: 0\r\n\r\n",
        "POST /user HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n",
        "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a \t\r\nX:\r\nY: \r\n\r\n", // trailing whitespace, empty values
        "GET http://a/user/2 HTTP/1.1\r\nHost: a\r\n\r\n",
    ];
    let follow = "GET /user/hidden HTTP/1.1\r\nHost: a\r\n\r\n";
    for head in heads {
        let crlfs: Vec<usize> = head.match_indices("\r\n").map(|(i, _)| i).collect();
        let mut variants: Vec<String> = crlfs
            .iter()
            .map(|&i| format!("{}\n{}", &head[..i], &head[i + 2..]))
            .collect();
        variants.push(head.replace("\r\n", "\n"));
        for v in variants {
            let stream = format!("{v}abc{follow}");
            let (statuses, after) = answers(stream.as_bytes());
            assert_eq!(
                (statuses, after),
                (vec!["400".to_string()], After::Close),
                "{v:?}"
            );
        }
        // The head as it is still answered (and the body skipped): the refusal is the LF's.
        let (statuses, _) = answers(format!("{head}abc{follow}").as_bytes());
        assert_eq!(
            statuses.first().map(String::as_str),
            Some("200"),
            "{head:?}"
        );
    }
    // The request the issue found hidden by a CRLF-only reader is not answered.
    let (statuses, after) = answers(b"GET / HTTP/1.1\r\nHost: a\r\nDummy: x\nContent-Length: 23\r\n\r\nGET / HTTP/1.1\r\nDummy: GET /admin HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!((statuses, after), (vec!["400".to_string()], After::Close));
}

#[test]
fn a_body_that_turns_out_malformed_gets_one_answer_not_two() {
    for body in [
        &b"zz\r\n"[..],               // bad size
        b"3\r\nabcX\r\n",             // no CRLF after the data
        b"fffffffffffffffffffff\r\n", // size overflow
        b"800\r\n",                   // over the body limit (1024)
        b"3;x\nabc\r\n0\r\n\r\n",     // bare LF in an extension
    ] {
        let mut input =
            b"POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        input.extend_from_slice(body);
        input.extend_from_slice(b"GET /user/1 HTTP/1.1\r\nHost: t\r\n\r\n");
        let (st, after) = answers(&input);
        assert_eq!(
            st.len(),
            1,
            "{}: {st:?}",
            String::from_utf8_lossy(body).escape_debug()
        );
        assert!(st[0] == "400" || st[0] == "413", "{st:?}");
        assert_eq!(after, After::Close);
    }
    // The answer waits for the whole body, then comes once.
    let mut conn = Connection::default();
    let mut out = Vec::new();
    let p = conn.process(
        b"POST /user HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhel",
        &mut out,
        &stamp(),
        LIMITS,
    );
    assert_eq!((p.requests, out.len()), (0, 0));
    assert!(conn.in_body());
    let p = conn.process(b"lo", &mut out, &stamp(), LIMITS);
    assert_eq!(
        (p.requests, statuses(std::str::from_utf8(&out).unwrap())),
        (1, vec!["200"])
    );
}

#[test]
fn a_valid_chunk_size_with_many_leading_zeros_is_accepted() {
    let input = b"POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0000000000000000003\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n";
    assert_eq!(
        answers(input),
        (vec!["200".into(), "200".into()], After::KeepAlive)
    );
}

#[test]
fn a_hidden_request_in_a_trailer_or_extension_is_never_answered() {
    // An LF-tolerant front end sees one request with a body; a lenient back end would find
    // a second one. Here: one refusal, then the connection closes.
    for smuggle in [
        &b"0\r\nX: 1\nGET /user/smuggled HTTP/1.1\r\nHost: t\r\n\r\n\r\n"[..],
        b"1;a\nGET /user/smuggled HTTP/1.1\r\nHost: t\r\n\r\nx\r\n0\r\n\r\n",
    ] {
        let mut input =
            b"POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        input.extend_from_slice(smuggle);
        let (out, p) = run(&input);
        assert!(!out.contains("smuggled"), "{out}");
        assert_eq!((statuses(&out), p.after), (vec!["400"], After::Close));
    }
}

#[test]
fn framing_on_http_1_0_and_transfer_codings() {
    // Transfer-Encoding on 1.0 is faulty framing: refuse and close, even with keep-alive.
    let (st, after) = answers(b"POST /user HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET / HTTP/1.0\r\n\r\n");
    assert_eq!((st, after), (vec!["400".to_string()], After::Close));
    let te = |v: &str| {
        answers(
            format!("POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: {v}\r\n\r\n0\r\n\r\n")
                .as_bytes(),
        )
        .0
    };
    assert_eq!(te("chunked"), ["200"]);
    assert_eq!(te("gzip"), ["501"]);
    assert_eq!(te("gzip, chunked"), ["501"]);
    assert_eq!(te("chunked, gzip"), ["400"]);
    assert_eq!(te("chunked, chunked"), ["400"]);
    // Two field lines form one list.
    let (st, _) = answers(b"POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
    assert_eq!(st, ["400"]);
}

#[test]
fn expect_continue_from_http_1_0_is_ignored() {
    let (out, _) = run(b"POST /user HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
    assert!(!out.contains("100 Continue"), "{out}");
    let (out, _) =
        run(b"POST /user HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi");
    assert_eq!(statuses(&out), ["200"]);
}

#[test]
fn head_gets_the_headers_of_get_and_no_body() {
    let (get, _) = run(b"GET /user/42 HTTP/1.1\r\nHost: t\r\n\r\n");
    let (head, p) =
        run(b"HEAD /user/42 HTTP/1.1\r\nHost: t\r\n\r\nGET /user/7 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(p.requests, 2);
    let first = head.split_inclusive("\r\n\r\n").next().unwrap();
    assert_eq!(
        format!("{first}42"),
        get,
        "same headers, Content-Length 2 included, no body"
    );
    assert!(head.ends_with("\r\n\r\n7"), "{head}");
    assert_eq!(
        statuses(&run(b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n").0),
        ["200"]
    );
    assert_eq!(
        statuses(&run(b"HEAD /user HTTP/1.1\r\nHost: t\r\n\r\n").0),
        ["404"]
    );
}

#[test]
fn absolute_form_targets_are_routed_by_their_path() {
    let (out, _) =
        run(b"GET http://example.com:3000/user/5?x=1 HTTP/1.1\r\nHost: example.com:3000\r\n\r\n");
    assert!(out.ends_with("\r\n\r\n5"), "{out}");
    assert_eq!(
        statuses(&run(b"GET HTTP://h HTTP/1.1\r\nHost: h\r\n\r\n").0),
        ["200"]
    );
    assert_eq!(
        statuses(&run(b"POST https://h/user HTTP/1.1\r\nHost: h\r\n\r\n").0),
        ["200"]
    );
    assert_eq!(origin_path("http://h?q"), "/");
    assert_eq!(origin_path("/user/1"), "/user/1");
}

#[test]
fn host_is_required_once_and_valid() {
    for (input, want) in [
        (&b"GET / HTTP/1.1\r\n\r\n"[..], "400"),
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "400"),
        (b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", "400"),
        (b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", "400"),
        (b"GET / HTTP/1.1\r\nHost: u@h\r\n\r\n", "400"),
        (b"GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", "400"),
        (b"GET / HTTP/1.1\r\nHost: 127.0.0.1:3000\r\n\r\n", "200"),
        (b"GET / HTTP/1.1\r\nHost: [::1]:3000\r\n\r\n", "200"),
        (b"GET / HTTP/1.1\r\nHost:\r\n\r\n", "200"),
        (b"GET / HTTP/1.0\r\n\r\n", "200"),
    ] {
        let (st, after) = answers(input);
        assert_eq!(
            st,
            [want],
            "{}",
            String::from_utf8_lossy(input).escape_debug()
        );
        if want == "400" {
            assert_eq!(after, After::Close);
        }
    }
}

#[test]
fn an_over_long_target_is_414_and_over_long_fields_431() {
    let long = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(MAX_HEAD));
    assert_eq!(answers(long.as_bytes()), (vec!["414".into()], After::Close));
    let partial = format!("GET /{}", "a".repeat(MAX_HEAD + 10));
    assert_eq!(answers(partial.as_bytes()).0, ["414"]);
    let fields = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nX: {}\r\n\r\n",
        "a".repeat(MAX_HEAD)
    );
    assert_eq!(answers(fields.as_bytes()).0, ["431"]);
}

/// The fuzz target's invariants over the smoke corpus (the fuzz campaign itself runs
/// outside the suite: docs/reliability.md).
#[test]
fn fuzz_invariants_hold_on_a_smoke_corpus() {
    for (data, cuts) in smoke_corpus(3000) {
        check_invariants(&data, &cuts);
    }
}
