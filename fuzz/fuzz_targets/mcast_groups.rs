//! Multicast groups read against the fixed subnet: never a panic; a
//! refusal names file and line; what parses survives the writer.

#![no_main]

use fabric::formats::mcast::{parse_groups, write_groups};
use ibfabric_fuzz::{assert_located, fixed};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let f = fixed();
    match parse_groups(f, text, Path::new("fuzz.txt")) {
        Ok(g) => {
            let written = write_groups(f, &g);
            let back = parse_groups(f, &written, Path::new("written.txt"))
                .unwrap_or_else(|e| panic!("the writer's output does not parse: {e}\n{written}"));
            assert_eq!(back, g);
        }
        Err(e) => assert_located(&e, "fuzz.txt", data),
    }
});
