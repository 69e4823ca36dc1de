//! The compact table files (`ibfabric-lfts.bin`, `ibfabric-sl2vl.bin`,
//! `ibfabric-pathsl.bin`) read against a fixed subnet: never a panic; a
//! refusal names the file and an offset inside the input; what reads
//! writes back to bytes that read as the same tables.

#![no_main]

use fabric::formats::compact::{lft, pathsl, sl2vl};
use ibfabric_fuzz::{assert_offset, fixed};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let f = fixed();
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    let file = Path::new("fuzz.bin");
    match which % 3 {
        0 => match lft::parse(f, bytes, file) {
            Ok(t) => {
                let back = lft::parse(f, &lft::write(f, &t, false), file)
                    .unwrap_or_else(|e| panic!("the writer's output does not read: {e}"));
                assert_eq!(back, t);
            }
            Err(e) => assert_offset(&e, "fuzz.bin", bytes),
        },
        1 => match sl2vl::parse(f, bytes, file) {
            Ok(t) => {
                let w = sl2vl::write(f, &t).expect("few tables");
                let back = sl2vl::parse(f, &w, file)
                    .unwrap_or_else(|e| panic!("the writer's output does not read: {e}"));
                assert_eq!(back, t);
            }
            Err(e) => assert_offset(&e, "fuzz.bin", bytes),
        },
        _ => match pathsl::parse(f, bytes, file) {
            Ok(t) => {
                let w = pathsl::write(&t).expect("fits");
                let back = pathsl::parse(f, &w, file)
                    .unwrap_or_else(|e| panic!("the writer's output does not read: {e}"));
                assert_eq!(back, t);
            }
            Err(e) => assert_offset(&e, "fuzz.bin", bytes),
        },
    }
});
