//! Any byte stream through the server's HTTP layer (the very files the server compiles), cut
//! into pieces the fuzzer also chooses: `http::check_invariants` panics if the answer depends
//! on the cuts, if a response answers no request, if anything is answered after a refusal, or
//! if a refusal does not close; `framing_reference::check_against_reference` panics if the
//! server and a strict reference framing written apart from it disagree on where any request
//! ends (request smuggling is exactly such a disagreement).

#![no_main]
#![allow(dead_code)]

#[path = "../../app/src/chunked.rs"]
mod chunked;
#[path = "../../app/src/framing_reference.rs"]
mod framing_reference;
#[path = "../../app/src/http/mod.rs"]
mod http;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // The first four bytes choose the cut sizes (1–64), the rest is the stream.
    let (cuts, stream) = data.split_at(data.len().min(4));
    let cuts: Vec<usize> = cuts.iter().map(|&b| usize::from(b % 64) + 1).collect();
    http::check_invariants(stream, &cuts);
    framing_reference::check_against_reference(stream);
});
