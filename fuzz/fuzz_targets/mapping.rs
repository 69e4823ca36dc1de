//! Mapping files of one subnet with four router ports: never a panic; a
//! refusal names file and line; what parses is written back to the same
//! mapping.

#![no_main]

use fabric::formats::mapping;
use fabric::intersubnet::RouterPortView;
use ibfabric_fuzz::assert_located;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

const PREFIX: u64 = 0xfe80_0000_0000_0001;

fn ports() -> Vec<RouterPortView> {
    [
        (0xa, 1, 0x0002_c903_00a0_0001, 40),
        (0xa, 2, 0x0002_c903_00a0_0002, 41),
        (0xb, 1, 0x0002_c903_00b0_0001, 50),
        (0xb, 2, 0x0002_c903_00b0_0002, 51),
    ]
    .into_iter()
    .map(|(router_guid, port, port_guid, lid)| RouterPortView {
        router_guid,
        port,
        port_guid,
        lid,
        switch_guid: 0,
        primary_lids: Vec::new(),
    })
    .collect()
}

fuzz_target!(|data: &[u8]| {
    let ports = ports();
    match mapping::parse(data, Path::new("fuzz.map"), PREFIX, &ports) {
        Ok(m) => {
            let written = mapping::write(&m);
            let back = mapping::parse(written.as_bytes(), Path::new("written.map"), PREFIX, &ports)
                .unwrap_or_else(|e| panic!("the writer's output does not parse: {e}\n{written}"));
            assert_eq!(back, m);
        }
        Err(e) => assert_located(&e, "fuzz.map", data),
    }
});
