//! The binary fabric workers receive: never a panic; a refusal names the
//! byte; what reads back writes the same bytes again and the same text.

#![no_main]

use fabric::formats::{fabric_bin, ibnetdiscover};
use ibfabric_fuzz::assert_same_fabric;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match fabric_bin::read(data) {
        Ok(f) => {
            let written = fabric_bin::write(&f);
            let back = fabric_bin::read(&written)
                .unwrap_or_else(|e| panic!("the writer's output does not read back: {e}"));
            assert_same_fabric(&f, &back);
            assert_eq!(fabric_bin::write(&back), written);
            assert_eq!(ibnetdiscover::write(&back), ibnetdiscover::write(&f));
        }
        Err(fabric_bin::FabricBinError::Magic) => assert!(!fabric_bin::is_binary(data)),
        Err(fabric_bin::FabricBinError::Model(_)) => {}
        Err(e) => assert!(e.to_string().contains("byte"), "{e}"),
    }
});
