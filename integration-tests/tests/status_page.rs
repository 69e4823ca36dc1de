//! The controller's status page, from a real controller process: every
//! subnet and router with their versions, and a stopped agent shown as
//! lagging with why.

use integration_tests::cluster::{Cluster, wait_for};
use std::time::Duration;

const CONVERGE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_shows_the_fabric_and_a_stopped_agent_as_lagging() {
    let mut c = Cluster::start(2, 1, "updn").expect("cluster starts");
    c.converged(0, CONVERGE).await.expect("converges");
    // The page is off unless the config says so: add it and restart.
    let cfg = c.path("ctl.toml");
    let text = std::fs::read_to_string(&cfg).expect("config");
    std::fs::write(&cfg, format!("status_page = true\n{text}")).expect("config");
    c.restart_controller(0).expect("restarts");
    c.converged(0, CONVERGE).await.expect("converges again");
    let port = c.metrics_port("ctl").expect("port");
    let page = |want: &'static str| async move {
        wait_for(want, Duration::from_secs(20), || async move {
            integration_tests::chaos::http_get(port, "/status")
                .await
                .filter(|p| p.contains(want))
        })
        .await
    };
    let p = page("Nothing: every subnet and router holds what is published.")
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    assert!(p.contains("content-type: text/html"), "{p}");
    for a in &c.agents {
        assert!(
            p.contains(&format!("<td>{}</td>", a.name)),
            "{} missing:\n{p}",
            a.name
        );
    }
    assert!(p.contains("<svg"), "{p}");
    assert_eq!(
        p.matches("<line ").count(),
        2,
        "each subnet joined to the router:\n{p}"
    );
    // An agent stops: past its lease it is not live, and the page says so.
    let name = c.agents[0].name.clone();
    c.agents[0].proc.kill();
    let p = page("not live: no report within the lease")
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    assert!(p.contains(&format!("subnet {name} (")), "{p}");

    // In a real browser: Debian's chromium, headless, loads and lays out
    // the page; the DOM it built holds the lag and the picture.
    // STATUS_SCREENSHOT=FILE also saves what it drew (docs/status-page.png).
    let url = format!("http://127.0.0.1:{port}/status");
    let chromium = |extra: &[&str]| {
        std::process::Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
            ])
            .args(extra)
            .arg(&url)
            .output()
    };
    match chromium(&["--dump-dom"]) {
        Err(e) => eprintln!(
            "SKIP the browser check: chromium not runnable ({e}); scripts/install-deps.sh installs it"
        ),
        Ok(o) => {
            let dom = String::from_utf8_lossy(&o.stdout);
            assert!(
                o.status.success(),
                "chromium: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            assert!(
                dom.contains("not live: no report within the lease"),
                "{dom}"
            );
            assert!(dom.contains("<svg") && dom.contains("<line "), "{dom}");
            if let Ok(path) = std::env::var("STATUS_SCREENSHOT") {
                let shot = format!("--screenshot={path}");
                let o = chromium(&[&shot, "--window-size=1280,760"]).expect("chromium runs");
                assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            }
        }
    }
}
