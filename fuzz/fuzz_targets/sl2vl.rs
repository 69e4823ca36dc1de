//! SL2VL dumps read against a fixed subnet: never a panic; a refusal names
//! file and line; what parses survives the writer. The writer lists only
//! linked ports, so rows set for unlinked ones are compared through it.

#![no_main]

use fabric::formats::sl2vl;
use ibfabric_fuzz::{assert_located, fixed};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let f = fixed();
    match sl2vl::parse(f, text, Path::new("fuzz.dump")) {
        Ok(t) => {
            let written = sl2vl::write(f, &t);
            let back = sl2vl::parse(f, &written, Path::new("written.dump"))
                .unwrap_or_else(|e| panic!("the writer's output does not parse: {e}\n{written}"));
            assert_eq!(sl2vl::write(f, &back), written);
        }
        Err(e) => assert_located(&e, "fuzz.dump", data),
    }
});
