//! The controller's status page from any state a controller could hold:
//! a `ControllerState` decoded from the bytes (reports' link-load
//! histograms, updates, names with markup) rendered as HTML. Never a
//! panic, and no markup from the state reaches the page.

#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;
use proto::v1;

fuzz_target!(|data: &[u8]| {
    let Ok(state) = v1::ControllerState::decode(data) else {
        return;
    };
    let page = controller::status_page::render(&state);
    // The page has no script of its own: one can only come from the state
    // (a name, an error text) reaching it unescaped.
    assert!(!page.contains("<script"), "markup from the state reached the page");
});
