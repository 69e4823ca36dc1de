//! The memory store's state file (`store::statefile`): a snapshot then a
//! journal. Never a panic; a refusal names the file and a line inside the
//! input; what reads is written out as a snapshot and reads back to the
//! same keys and revision.

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let p = Path::new("/fuzz/state");
    let l = match store::statefile::parse(text, p) {
        Ok(l) => l,
        Err(e) => {
            let msg = e.to_string();
            let lines = text.split('\n').count().max(1);
            let at = msg
                .strip_prefix("store configuration: state file /fuzz/state:")
                .or_else(|| msg.split("state file /fuzz/state:").nth(1))
                .and_then(|r| r.split(':').next())
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or_else(|| panic!("a refusal without a line: {msg}"));
            assert!(
                (1..=lines).contains(&at),
                "line {at} outside 1..={lines}: {msg}"
            );
            return;
        }
    };
    let again = store::statefile::snapshot(l.revision, l.keys.iter());
    let back = store::statefile::parse(&again, p)
        .unwrap_or_else(|e| panic!("a snapshot written does not read: {e}"));
    assert_eq!(back.revision, l.revision);
    assert_eq!(back.keys, l.keys);
});
