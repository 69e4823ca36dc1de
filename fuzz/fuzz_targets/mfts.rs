//! Multicast forwarding tables (OpenSM's opensm.mcfdbs form) read against
//! the fixed subnet: never a panic; a refusal names file and line; what
//! parses survives the writer.

#![no_main]

use fabric::formats::mcast::{parse_mfts, write_mfts};
use ibfabric_fuzz::{assert_located, fixed};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let f = fixed();
    match parse_mfts(f, text, Path::new("fuzz.mcfdbs")) {
        Ok(t) => {
            let written = write_mfts(f, &t);
            let back = parse_mfts(f, &written, Path::new("written.mcfdbs"))
                .unwrap_or_else(|e| panic!("the writer's output does not parse: {e}\n{written}"));
            assert_eq!(back, t);
        }
        Err(e) => assert_located(&e, "fuzz.mcfdbs", data),
    }
});
