//! GUID lists (Up*/Down* roots): never a panic; a refusal names file and
//! line, also when the GUIDs are checked against a subnet.

#![no_main]

use fabric::formats::guids;
use ibfabric_fuzz::{assert_located, fixed};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let file = Path::new("fuzz.guids");
    match guids::parse(data, file) {
        Ok(lines) => {
            if let Err(e) = guids::check_switch_guids(fixed(), &lines, file) {
                assert_located(&e, "fuzz.guids", data);
            }
        }
        Err(e) => assert_located(&e, "fuzz.guids", data),
    }
});
