//! Identity URIs and certificates, configuration rules and the errors a
//! misconfigured service gets, without a network.

use ibtls::{
    CaBundle, Identity, IdentityError, TlsError, TlsSettings, Transport, TransportError,
    generate_ca, issue, server_tls,
};
use rcgen::{CertificateParams, Issuer, KeyPair, SanType};
use serde::Deserialize;
use std::path::Path;

#[test]
fn identities_round_trip() {
    let ids = [
        Identity::Controller,
        Identity::Agent { prefix: 0 },
        Identity::Agent {
            prefix: 0xfec0000000000001,
        },
        Identity::Agent { prefix: u64::MAX },
        Identity::Router {
            guid: 0x0002c90300000001,
        },
        Identity::Worker {
            name: "w-01.rack_3".into(),
        },
    ];
    for id in ids {
        let uri = id.to_uri();
        assert_eq!(uri.parse::<Identity>(), Ok(id.clone()), "{uri}");
        assert_eq!(Identity::parse_uri(&uri).map(|i| i.to_uri()), Ok(uri));
    }
    assert_eq!(
        "ibfabric://agent/0xfec0000000000001".parse(),
        Ok(Identity::Agent {
            prefix: 0xfec0000000000001
        })
    );
    assert_eq!(
        "ibfabric://router/0x0002c90300000001".parse(),
        Ok(Identity::Router {
            guid: 0x0002c90300000001
        })
    );
}

#[test]
fn garbage_is_refused_with_a_reason() {
    for junk in [
        "",
        "controller",
        "https://controller",
        "ibfabric:controller",
        "ibfabric://",
        "ibfabric://admin",
        "ibfabric://agent/0x",
        "ibfabric://agent/0xfec000000000000g",
        "ibfabric://agent/0xfec0000000000001/extra",
        "ibfabric://agent/18338657682652659713",
        "ibfabric://router/0x2c90300000001",
        "ibfabric://worker/../etc",
        "ibfabric://worker/name with spaces",
        "ibfabric://controller?x=1",
        " ibfabric://controller",
    ] {
        let err = Identity::parse_uri(junk).expect_err(junk);
        assert!(!err.to_string().is_empty());
    }
    let err = Identity::parse_uri("ibfabric://agent/0xFEC0000000000001").unwrap_err();
    assert!(err.to_string().contains("16 lowercase hex digits"), "{err}");
}

fn leaf_with_uris(uris: &[&str]) -> String {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::default();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let issuer = Issuer::new(ca_params, ca_key);
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    for uri in uris {
        params
            .subject_alt_names
            .push(SanType::URI((*uri).try_into().unwrap()));
    }
    let key = KeyPair::generate().unwrap();
    params.signed_by(&key, &issuer).unwrap().pem()
}

#[test]
fn a_leaf_certificate_carries_exactly_one_identity() {
    let one = leaf_with_uris(&["spiffe://example.org/x", "ibfabric://controller"]);
    assert_eq!(
        Identity::from_cert_pem(one.as_bytes()),
        Ok(Identity::Controller),
        "foreign URIs are ignored"
    );
    let none = leaf_with_uris(&["spiffe://example.org/x"]);
    assert_eq!(
        Identity::from_cert_pem(none.as_bytes()),
        Err(IdentityError::Missing)
    );
    let two = leaf_with_uris(&[
        "ibfabric://controller",
        "ibfabric://agent/0x0000000000000001",
    ]);
    assert!(matches!(
        Identity::from_cert_pem(two.as_bytes()),
        Err(IdentityError::Several(v)) if v.len() == 2
    ));
    let shouting = leaf_with_uris(&["ibfabric://controller", "IBFABRIC://controller"]);
    assert!(matches!(
        Identity::from_cert_pem(shouting.as_bytes()),
        Err(IdentityError::Several(_))
    ));
    let bad = leaf_with_uris(&["ibfabric://agent/1"]);
    assert!(matches!(
        Identity::from_cert_pem(bad.as_bytes()),
        Err(IdentityError::Malformed { .. })
    ));
    assert!(matches!(
        Identity::from_cert_der(b"not a certificate"),
        Err(IdentityError::Certificate(_))
    ));
    assert!(Identity::from_cert_pem(b"-----BEGIN CERTIFICATE-----\nnope\n").is_err());
}

/// A service configuration as the services will embed it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ServiceConfig {
    tls: Option<TlsSettings>,
    #[serde(default)]
    insecure: bool,
}

fn transport(toml_text: &str) -> Result<Transport, TransportError> {
    let c: ServiceConfig = toml::from_str(toml_text).expect("parses");
    Transport::from_config(c.tls, c.insecure)
}

#[test]
fn configs_choose_tls_or_say_insecure() {
    let tls = transport("[tls]\nca = \"ca.pem\"\ncert = \"agent.pem\"\nkey = \"agent-key.pem\"\n")
        .unwrap();
    assert_eq!(tls.scheme(), "https");
    assert_eq!(transport("insecure = true\n"), Ok(Transport::Insecure));
    let err = transport("").unwrap_err();
    assert_eq!(err, TransportError::Unconfigured);
    assert!(err.to_string().contains("insecure = true"));
    assert_eq!(
        transport("insecure = true\n[tls]\nca = \"a\"\ncert = \"b\"\nkey = \"c\"\n"),
        Err(TransportError::Conflicting)
    );
    assert!(toml::from_str::<ServiceConfig>("[tls]\nca = \"a\"\ncert = \"b\"\n").is_err());
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[test]
fn bad_files_are_named_with_their_cause() {
    let d = tempfile::tempdir().unwrap();
    let p = |name: &str| d.path().join(name);
    let ca = generate_ca("test").unwrap();
    let leaf = issue(&ca, &Identity::Controller, &["localhost".into()], &[]).unwrap();
    let other = issue(&ca, &Identity::Controller, &[], &[]).unwrap();
    write(&p("ca.pem"), &ca.cert_pem);
    write(&p("c.pem"), &leaf.cert_pem);
    write(&p("c-key.pem"), &leaf.key_pem);
    write(&p("other-key.pem"), &other.key_pem);
    write(&p("junk.pem"), "hello\n");
    let good = TlsSettings {
        ca: p("ca.pem"),
        cert: p("c.pem"),
        key: p("c-key.pem"),
    };
    assert_eq!(good.identity().unwrap(), Identity::Controller);
    assert!(server_tls(&good).is_ok());

    let msg = |s: TlsSettings| server_tls(&s).unwrap_err().to_string();
    let m = msg(TlsSettings {
        ca: p("missing.pem"),
        ..good.clone()
    });
    assert!(
        m.starts_with("reading CA certificate") && m.contains("missing.pem"),
        "{m}"
    );
    let m = msg(TlsSettings {
        cert: p("junk.pem"),
        ..good.clone()
    });
    assert!(
        m.contains("junk.pem") && m.contains("no PEM CERTIFICATE section"),
        "{m}"
    );
    let m = msg(TlsSettings {
        key: p("junk.pem"),
        ..good.clone()
    });
    assert!(
        m.starts_with("private key") && m.contains("no PEM PRIVATE KEY"),
        "{m}"
    );
    let m = msg(TlsSettings {
        key: p("other-key.pem"),
        ..good.clone()
    });
    assert!(m.contains("does not fit the certificate"), "{m}");
    let m = msg(TlsSettings {
        ca: p("c.pem"),
        ..good.clone()
    });
    assert!(m.contains("not a CA certificate"), "{m}");
    let m = msg(TlsSettings {
        cert: p("ca.pem"),
        ..good.clone()
    });
    assert!(m.contains("a leaf certificate was expected"), "{m}");
    assert!(matches!(
        server_tls(&TlsSettings {
            ca: p("nope.pem"),
            ..good
        }),
        Err(TlsError::Read { .. })
    ));
}

#[test]
fn a_ca_loads_from_its_files_and_issues() {
    let d = tempfile::tempdir().unwrap();
    let ca = generate_ca("test").unwrap();
    write(&d.path().join("ca.pem"), &ca.cert_pem);
    write(&d.path().join("ca-key.pem"), &ca.key_pem);
    let loaded = CaBundle::load(&d.path().join("ca.pem"), &d.path().join("ca-key.pem")).unwrap();
    let id = Identity::Worker { name: "w1".into() };
    let leaf = issue(&loaded, &id, &[], &[]).unwrap();
    assert_eq!(Identity::from_cert_pem(leaf.cert_pem.as_bytes()), Ok(id));
    let err = CaBundle::load(&d.path().join("ca.pem"), &d.path().join("none.pem")).unwrap_err();
    assert!(err.to_string().contains("none.pem"), "{err}");
}
