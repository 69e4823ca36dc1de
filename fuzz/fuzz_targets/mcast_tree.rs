//! Reserved multicast trees' plans read against the fixed subnet: never a
//! panic; a refusal names file and line; what parses survives the writer.

#![no_main]

use fabric::formats::mcast::{parse_tree, write_tree};
use ibfabric_fuzz::{assert_located, fixed};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let f = fixed();
    match parse_tree(f, text, Path::new("fuzz.txt")) {
        Ok(p) => {
            let written = write_tree(f, &p);
            let back = parse_tree(f, &written, Path::new("written.txt"))
                .unwrap_or_else(|e| panic!("the writer's output does not parse: {e}\n{written}"));
            assert_eq!(back, p);
        }
        Err(e) => assert_located(&e, "fuzz.txt", data),
    }
});
