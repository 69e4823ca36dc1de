//! path-SL files read against a fixed subnet: never a panic; a refusal
//! names file and line; what parses gives every source the same row after
//! a write and a re-read.

#![no_main]

use fabric::formats::pathsl;
use ibfabric_fuzz::{assert_located, fixed};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let f = fixed();
    match pathsl::parse(f, data, Path::new("fuzz.txt")) {
        Ok(p) => {
            let written = pathsl::write(f, &p);
            let back = pathsl::parse(f, written.as_bytes(), Path::new("written.txt"))
                .unwrap_or_else(|e| panic!("the writer's output does not parse: {e}\n{written}"));
            // Row numbering follows the input's line order; what a source
            // gets does not.
            for lid in 0..=f.max_lid() {
                assert_eq!(back.row_of(lid), p.row_of(lid), "source LID {lid}");
            }
            assert_eq!(pathsl::write(f, &back), written);
        }
        Err(e) => assert_located(&e, "fuzz.txt", data),
    }
});
