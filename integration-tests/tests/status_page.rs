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
    // Each subnet's link-load histogram, measured by its agent once its
    // tables are in force and sent with the next heartbeat.
    let p = wait_for("both histograms", Duration::from_secs(20), || async move {
        integration_tests::chaos::http_get(port, "/status")
            .await
            .filter(|p| p.matches("<svg class=\"load\"").count() == 2)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    assert_eq!(p.matches("paths, mean").count(), 2, "{p}");
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

/// A free loopback port (bound, then released for the controller).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `curl` of `url` with the client certificate of `who` (none: no client
/// certificate), trusting the cluster's CA: its exit status and output.
fn curl(url: &str, ca: &std::path::Path, who: Option<&ibtls::TlsSettings>) -> (bool, String) {
    let mut cmd = std::process::Command::new("curl");
    cmd.args(["-sS", "--max-time", "10", "--cacert"]).arg(ca);
    if let Some(t) = who {
        cmd.arg("--cert").arg(&t.cert).arg("--key").arg(&t.key);
    }
    let o = cmd
        .arg(url)
        .output()
        .expect("curl runs (scripts/install-deps.sh installs it)");
    let mut text = String::from_utf8_lossy(&o.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&o.stderr));
    (o.status.success(), text)
}

/// Chromium, headless, with an operator's certificate in its NSS store and
/// the cluster's CA trusted there, and a policy that hands the certificate
/// to `origin`: the policy lives in a private mount of /etc/chromium (a
/// mount namespace of this process alone), so the host is left as it
/// was. `None` (said why): this machine cannot run it.
fn chromium_with_cert(
    dir: &std::path::Path,
    op: &ibtls::TlsSettings,
    origin: &str,
    url: &str,
) -> Option<String> {
    let run = |cmd: &mut std::process::Command| cmd.output().ok().filter(|o| o.status.success());
    let home = dir.join("browser-home");
    let db = home.join(".pki/nssdb");
    std::fs::create_dir_all(&db).expect("nssdb dir");
    let p12 = dir.join("operator.p12");
    let sql = format!("sql:{}", db.display());
    let steps = [
        run(std::process::Command::new("openssl")
            .args([
                "pkcs12", "-export", "-passout", "pass:", "-name", "operator", "-in",
            ])
            .arg(&op.cert)
            .arg("-inkey")
            .arg(&op.key)
            .arg("-out")
            .arg(&p12)),
        run(std::process::Command::new("certutil").args(["-N", "--empty-password", "-d", &sql])),
        run(std::process::Command::new("pk12util")
            .args(["-W", "", "-d", &sql, "-i"])
            .arg(&p12)),
        run(std::process::Command::new("certutil")
            .args(["-A", "-n", "ibfabric-ca", "-t", "C,,", "-d", &sql, "-i"])
            .arg(&op.ca)),
    ];
    if steps.iter().any(Option::is_none) {
        eprintln!(
            "SKIP the browser over TLS: openssl, certutil or pk12util missing (scripts/install-deps.sh installs them)"
        );
        return None;
    }
    let etc = dir.join("etc-chromium");
    let managed = etc.join("policies/managed");
    std::fs::create_dir_all(&managed).expect("policy dir");
    let pattern = serde_json::json!({"pattern": origin, "filter": {}}).to_string();
    let policy = serde_json::json!({ "AutoSelectCertificateForUrls": [pattern] });
    std::fs::write(managed.join("ibfabric-test.json"), policy.to_string()).expect("policy");
    let script = format!(
        "mount --bind '{}' /etc/chromium && exec chromium --headless --no-sandbox --disable-gpu \
         --user-data-dir='{}' --dump-dom '{url}'",
        etc.display(),
        home.join("profile").display()
    );
    let o = std::process::Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .env("HOME", &home)
        .output();
    match o {
        Ok(o) if o.status.success() => Some(String::from_utf8_lossy(&o.stdout).into_owned()),
        Ok(o) => {
            eprintln!(
                "SKIP the browser over TLS: chromium in a private mount namespace did not run \
                 (root or user namespaces and /etc/chromium needed): {}",
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .last()
                    .unwrap_or_default()
            );
            None
        }
        Err(e) => {
            eprintln!("SKIP the browser over TLS: unshare not runnable ({e})");
            None
        }
    }
}

/// `status_listen`: the page over HTTPS with the controller's own
/// certificate and mutual TLS. An operator's certificate gets it, in curl
/// and in a real browser; an agent's certificate gets 403; no certificate
/// gets no TLS session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_over_mutual_tls_is_shown_to_operators_only() {
    let mut c = Cluster::start(2, 1, "updn").expect("cluster starts");
    c.converged(0, CONVERGE).await.expect("converges");
    let port = free_port();
    let cfg = c.path("ctl.toml");
    let text = std::fs::read_to_string(&cfg).expect("config");
    std::fs::write(
        &cfg,
        format!("status_listen = \"127.0.0.1:{port}\"\n{text}"),
    )
    .expect("config");
    c.restart_controller(0).expect("restarts");
    c.converged(0, CONVERGE).await.expect("converges again");
    let op = c
        .tls_for(&ibtls::Identity::Operator {
            name: "alice".into(),
        })
        .expect("operator certificate");
    let agent = c
        .tls_for(&ibtls::Identity::Agent {
            prefix: 0xfec0_0000_0000_0042,
        })
        .expect("agent certificate");
    let origin = format!("https://127.0.0.1:{port}");
    let url = format!("{origin}/status");
    let want = "Nothing: every subnet and router holds what is published.";
    let mut page = String::new();
    for _ in 0..100 {
        let (ok, p) = curl(&url, &op.ca, Some(&op));
        if ok && p.contains(want) {
            page = p;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(page.contains(want), "{page}\n{}", c.logs());
    assert!(page.contains("<svg"), "{page}");
    let (ok, p) = curl(&url, &op.ca, Some(&agent));
    assert!(ok && p.contains("may not read the status page"), "{p}");
    let (ok, p) = curl(&url, &op.ca, None);
    assert!(!ok, "no client certificate, no page: {p}");

    let name = c.agents[0].name.clone();
    c.agents[0].proc.kill();
    let lag = "not live: no report within the lease";
    wait_for(lag, Duration::from_secs(20), || {
        let (url, ca, op) = (url.clone(), op.ca.clone(), op.clone());
        async move { Some(curl(&url, &ca, Some(&op)).1).filter(|p| p.contains(lag)) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    let dir = tempfile::tempdir().expect("tmp");
    if let Some(dom) = chromium_with_cert(dir.path(), &op, &origin, &url) {
        assert!(dom.contains(lag), "{dom}");
        assert!(dom.contains(&format!("subnet {name} (")), "{dom}");
        assert!(dom.contains("<svg") && dom.contains("<line "), "{dom}");
    }
}
