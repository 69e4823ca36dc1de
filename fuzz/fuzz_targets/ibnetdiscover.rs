//! ibnetdiscover topologies: never a panic; a refusal names file and line;
//! what parses survives the writer.

#![no_main]

use fabric::formats::ibnetdiscover;
use ibfabric_fuzz::{assert_located, assert_same_fabric};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    // `read` refuses non-UTF-8 files before the grammar sees them.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match ibnetdiscover::parse(text, Path::new("fuzz.net")) {
        Ok(f) => {
            let written = ibnetdiscover::write(&f);
            let back = ibnetdiscover::parse(&written, Path::new("written.net"))
                .unwrap_or_else(|e| panic!("the writer's output does not parse: {e}\n{written}"));
            assert_same_fabric(&f, &back);
            assert_eq!(ibnetdiscover::write(&back), written);
        }
        Err(e) => assert_located(&e, "fuzz.net", data),
    }
});
