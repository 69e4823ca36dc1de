//! Certificates that rotate: a controller (a real process with mutual TLS)
//! reads its certificate, key and CA bundle again on SIGHUP, new
//! connections get the new ones, open connections and the fabric stay,
//! bad files leave the ones in force, and the days left on its own and its
//! peers' certificates are metrics.

use ibtls::{Identity, Role, TlsSettings, Transport};
use integration_tests::cluster::{Cluster, issue_into, wait_for};
use proto::v1;
use std::time::Duration;

const CONVERGE: Duration = Duration::from_secs(30);

/// Whether a `state` call as `client` gets an answer from controller 0 on
/// a fresh connection.
async fn answers(c: &Cluster, client: &TlsSettings) -> bool {
    let t = Transport::Tls(client.clone());
    match c
        .connect_as(&c.controllers[0].0, Role::Controller, &t)
        .await
    {
        Err(_) => false,
        Ok(ch) => proto::client::controller_client(ch)
            .state(v1::StateRequest {})
            .await
            .is_ok(),
    }
}

const EXPIRY: &str = "ibfabric_certificate_expiry_timestamp_seconds";

/// Days from now to the expiry the sample with `label` gives.
fn days_left(metrics: &str, label: &str) -> Option<f64> {
    let at = sample(metrics, EXPIRY, label)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs_f64();
    Some((at - now) / 86_400.0)
}

/// The value of the first sample of `name` whose labels contain `label`.
fn sample(metrics: &str, name: &str, label: &str) -> Option<f64> {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && l.contains(label))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

async fn scrape_until(c: &Cluster, what: &str, ok: impl Fn(&str) -> bool) -> String {
    wait_for(what, Duration::from_secs(15), || async {
        c.scrape("ctl").await.filter(|m| ok(m))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_reloads_its_certificate_and_ca_on_sighup_without_dropping_connections() {
    let c = Cluster::start(2, 1, "updn").expect("cluster starts");
    c.converged(0, CONVERGE).await.expect("converges");
    let ctl = settings(&c, &Identity::Controller);

    // About a year left on its own certificate and on the agents' that
    // connected to it.
    let m = scrape_until(&c, "expiry metrics", |m| {
        m.contains("peer=\"ibfabric://agent/")
    })
    .await;
    let own = days_left(&m, "certificate=\"own\"").expect("own expiry");
    assert!((360.0..=366.0).contains(&own), "{own}");
    let peer = days_left(&m, "peer=\"ibfabric://agent/").expect("an agent's expiry");
    assert!((360.0..=366.0).contains(&peer), "{peer}");
    let own_before = sample(&m, EXPIRY, "certificate=\"own\"").unwrap_or(0.0);

    // A connection opened now trusts the first CA only.
    let old = proto::client::controller_client(
        c.connect_as(&c.controllers[0].0, Role::Controller, &c.client)
            .await
            .expect("connects"),
    );
    assert!(old.clone().state(v1::StateRequest {}).await.is_ok());

    // A second CA: a client that trusts only it, with a certificate of
    // its own from it.
    let dir2 = c.path("ca2");
    std::fs::create_dir_all(&dir2).expect("dir");
    let ca2 = ibtls::generate_ca("second CA").expect("ca");
    std::fs::write(dir2.join("ca.pem"), &ca2.cert_pem).expect("ca");
    let only2 = issue_into(
        &dir2,
        &ca2,
        &Identity::Worker {
            name: "second".into(),
        },
    )
    .expect("cert");
    assert!(
        !answers(&c, &only2).await,
        "the second CA is not trusted yet"
    );

    // The controller's files rotate: the bundle holds both CAs, its
    // certificate comes from the second. Then SIGHUP.
    let bundle = format!("{}{}", c.ca.cert_pem, ca2.cert_pem);
    std::fs::write(&ctl.ca, &bundle).expect("bundle");
    // A second later, so its expiry differs from the first one's.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let fresh = issue_into(&dir2, &ca2, &Identity::Controller).expect("cert");
    let fresh_expiry = ibtls::Identity::not_after_pem(&std::fs::read(&fresh.cert).expect("read"))
        .expect("expiry") as f64;
    assert!(fresh_expiry > own_before);
    std::fs::copy(&fresh.key, &ctl.key).expect("key");
    std::fs::copy(&fresh.cert, &ctl.cert).expect("cert");
    c.controllers[0].1.signal("HUP").expect("SIGHUP");
    wait_for("the reload", Duration::from_secs(15), || async {
        answers(&c, &only2).await.then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));

    // The connection opened before still answers: it was not dropped (a
    // new handshake on it would fail, the server's certificate now being
    // of a CA it does not trust).
    assert!(old.clone().state(v1::StateRequest {}).await.is_ok());
    // Clients of the first CA still get in: the bundle holds it (the
    // tester's CA file is the bundle now, and its certificate is of the
    // first CA).
    let tester = match &c.client {
        Transport::Tls(s) => s.clone(),
        Transport::Insecure => unreachable!("the cluster runs TLS"),
    };
    assert!(answers(&c, &tester).await, "a first-CA client is accepted");
    let m = scrape_until(&c, "the reload counted", |m| {
        m.contains("ibfabric_tls_reloads_total{result=\"ok\"} 1")
    })
    .await;
    // The metric is the new certificate's expiry.
    assert_eq!(
        sample(&m, EXPIRY, "certificate=\"own\""),
        Some(fresh_expiry)
    );

    // Files that fail the checks leave the ones in force.
    std::fs::write(&ctl.cert, "not a certificate\n").expect("garbage");
    c.controllers[0].1.signal("HUP").expect("SIGHUP");
    scrape_until(&c, "the failed reload counted", |m| {
        m.contains("ibfabric_tls_reloads_total{result=\"error\"} 1")
    })
    .await;
    assert!(
        answers(&c, &only2).await,
        "the second CA's certificate stays in force"
    );
    assert!(c.controllers[0].1.log().contains("TLS files not reloaded"));

    // A certificate of another identity is refused on reload, as at start.
    let other = issue_into(&dir2, &ca2, &Identity::Worker { name: "w".into() }).expect("cert");
    std::fs::copy(&other.key, &ctl.key).expect("key");
    std::fs::copy(&other.cert, &ctl.cert).expect("cert");
    c.controllers[0].1.signal("HUP").expect("SIGHUP");
    scrape_until(&c, "the refused identity counted", |m| {
        m.contains("ibfabric_tls_reloads_total{result=\"error\"} 2")
    })
    .await;
    assert!(
        c.controllers[0]
            .1
            .log()
            .contains("where this service is ibfabric://controller")
    );
    assert!(
        answers(&c, &only2).await,
        "the controller's certificate stays in force"
    );

    // The fabric never noticed.
    c.converged(0, CONVERGE).await.expect("still converged");
}

fn settings(c: &Cluster, id: &Identity) -> TlsSettings {
    c.tls_for(id).expect("the controller's files")
}

/// A client's long-lived session (an agent's with the controller) ends on
/// SIGHUP when its TLS files changed and pass the checks, and reconnects
/// with them: the controller sees the new certificate. Files that fail the
/// checks leave the session as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_reconnects_with_its_new_certificate_on_sighup() {
    let c = Cluster::start(2, 1, "updn").expect("cluster starts");
    c.converged(0, CONVERGE).await.expect("converges");
    let id = Identity::Agent {
        prefix: c.agents[0].prefix,
    };
    let label = format!("peer=\"{id}\"");
    let m = scrape_until(&c, "the agent's expiry", |m| m.contains(&label)).await;
    let before = sample(&m, EXPIRY, &label).expect("expiry");

    // Garbage first: refused, the session stays.
    let files = settings(&c, &id);
    let good_cert = std::fs::read(&files.cert).expect("cert");
    std::fs::write(&files.cert, b"not a certificate").expect("garbage");
    c.agents[0].proc.signal("HUP").expect("SIGHUP");
    wait_for("the refusal logged", Duration::from_secs(15), || async {
        c.agents[0]
            .proc
            .log()
            .contains("this client's connection keeps the ones in force")
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    assert!(!c.agents[0].proc.log().contains("reconnecting with them"));
    std::fs::write(&files.cert, good_cert).expect("restore");

    // A new certificate a second later (a later expiry), then SIGHUP.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let dir = files.cert.parent().expect("dir").to_path_buf();
    let fresh = issue_into(&dir, &c.ca, &id).expect("new certificate");
    let after = ibtls::Identity::not_after_pem(&std::fs::read(&fresh.cert).expect("read"))
        .expect("expiry") as f64;
    assert!(after > before, "{after} > {before}");
    c.agents[0].proc.signal("HUP").expect("SIGHUP");
    scrape_until(&c, "the agent's new certificate seen", |m| {
        sample(m, EXPIRY, &label) == Some(after)
    })
    .await;
    assert!(c.agents[0].proc.log().contains("reconnecting with them"));
    c.converged(0, CONVERGE).await.expect("still converged");
}
