//! Any byte stream through the server's HTTP layer (the very files the server compiles), cut
//! into pieces the fuzzer also chooses: `http::check_invariants` panics if the answer depends
//! on the cuts, if a response answers no request, if anything is answered after a refusal, or
//! if a refusal does not close.

#![no_main]
#![allow(dead_code)]

#[path = "../../app/src/chunked.rs"]
mod chunked;
#[path = "../../app/src/http.rs"]
mod http;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // The first four bytes choose the cut sizes (1–64), the rest is the stream.
    let (cuts, stream) = data.split_at(data.len().min(4));
    let cuts: Vec<usize> = cuts.iter().map(|&b| usize::from(b % 64) + 1).collect();
    http::check_invariants(stream, &cuts);
});
