//! ibnetdiscover topologies: never a panic; a refusal names file and line;
//! what parses survives the writer, LMC ranges included; the reader that
//! takes one LID per port takes what the other reads with LMC 0, alike.

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
    match ibnetdiscover::parse_with_lmc(text, Path::new("fuzz.net")) {
        Ok(f) => {
            let written = ibnetdiscover::write(&f);
            let back = ibnetdiscover::parse_with_lmc(&written, Path::new("written.net"))
                .unwrap_or_else(|e| panic!("the writer's output does not parse: {e}\n{written}"));
            assert_same_fabric(&f, &back);
            assert_eq!(back.end_lids(), f.end_lids());
            assert_eq!(ibnetdiscover::write(&back), written);
            match ibnetdiscover::parse(text, Path::new("fuzz.net")) {
                Ok(one) => {
                    assert_eq!(f.max_lmc(), 0, "LMC {} read as one LID per port", f.max_lmc());
                    assert_eq!(ibnetdiscover::write(&one), written);
                }
                Err(e) => {
                    assert!(f.max_lmc() > 0, "refused without LMC: {e}");
                    assert_located(&e, "fuzz.net", data);
                }
            }
        }
        Err(e) => {
            assert_located(&e, "fuzz.net", data);
            assert!(ibnetdiscover::parse(text, Path::new("fuzz.net")).is_err());
        }
    }
});
