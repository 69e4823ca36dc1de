//! LFT dumps read against a fixed subnet: never a panic; a refusal names
//! file and line; what parses is written back to the same tables.

#![no_main]

use fabric::formats::lft;
use ibfabric_fuzz::{assert_located, fixed};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let f = fixed();
    match lft::parse(f, data, Path::new("fuzz.dump")) {
        Ok(t) => {
            let written = lft::write(f, &t);
            let back = lft::parse(f, written.as_bytes(), Path::new("written.dump"))
                .unwrap_or_else(|e| panic!("the writer's output does not parse: {e}\n{written}"));
            assert_eq!(back, t);
        }
        Err(e) => assert_located(&e, "fuzz.dump", data),
    }
});
