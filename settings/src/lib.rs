//! The services' config files: one TOML loader and one error type for the
//! agent, the controller and the router.
//!
//! A config is a `serde::Deserialize` struct that implements
//! [`ConfigFile`]. Types carry the validation wherever they can (enums for
//! closed sets, [`hex_u64`] for GUIDs and subnet prefixes,
//! `deny_unknown_fields` for misspelt keys), so a bad value is refused when
//! the file is read, with the file, the line and the cause;
//! [`ConfigFile::check`] holds what types cannot say (ranges, non-empty
//! names, one field depending on another).
//!
//! ```
//! use settings::ConfigFile;
//!
//! #[derive(serde::Deserialize)]
//! #[serde(deny_unknown_fields)]
//! struct Example {
//!     #[serde(deserialize_with = "settings::hex_u64")]
//!     guid: u64,
//! }
//! impl ConfigFile for Example {}
//!
//! let e = Example::parse("guid = \"0x0004000000000000\"\n", "example.toml").unwrap();
//! assert_eq!(e.guid, 0x0004_0000_0000_0000);
//! ```

use serde::de::{DeserializeOwned, Deserializer, Unexpected, Visitor};
use std::path::{Path, PathBuf};

/// A config file that could not be used. Both variants start with the file
/// (or whatever `origin` named the text), so an operator sees which one.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// TOML syntax, a wrong type, an unknown key or value (these carry line
    /// and column), or a failed [`ConfigFile::check`].
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

/// A rule a config's types cannot express, broken; the loader adds the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

/// A service's config file. Implementors only say what is special about
/// them; reading, parsing, reporting and path resolution are shared.
pub trait ConfigFile: DeserializeOwned {
    /// Rules beyond the types, checked after parsing.
    fn check(&self) -> Result<(), Invalid> {
        Ok(())
    }

    /// The path fields, which [`ConfigFile::load`] resolves against the
    /// config file's directory: a config names files next to it, wherever
    /// the service was started from.
    fn paths_mut(&mut self) -> Vec<&mut PathBuf> {
        Vec::new()
    }

    /// Parses and checks config text; `origin` names it in errors. Paths
    /// stay as written.
    fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: origin.to_string(),
            message,
        };
        let c: Self = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        c.check().map_err(|e| invalid(e.0))?;
        Ok(c)
    }

    /// Reads, parses and checks a config file with the process's
    /// `IBFABRIC_*` overrides ([`overrides`]), then resolves its relative
    /// paths against the file's directory.
    fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::load_with(path, overrides(std::env::vars()))
    }

    /// [`ConfigFile::load`] with the overrides given: `(key path, value)`.
    fn load_with(path: &Path, over: Vec<(Vec<String>, String)>) -> Result<Self, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: origin.clone(),
            source,
        })?;
        let mut c = if over.is_empty() {
            Self::parse(&text, &origin)?
        } else {
            let invalid = |message: String| ConfigError::Invalid {
                path: origin.clone(),
                message,
            };
            // The file alone first: its syntax errors carry its lines.
            let mut table: toml::Table = text
                .parse()
                .map_err(|e: toml::de::Error| invalid(e.to_string()))?;
            let names: Vec<String> = over.iter().map(|(k, _)| env_name(k)).collect();
            for (keys, value) in over {
                set(&mut table, &keys, value).map_err(invalid)?;
            }
            let c = Self::deserialize(toml::Value::Table(table))
                .map_err(|e| invalid(format!("{e} (with {})", names.join(", "))))?;
            c.check().map_err(|e| invalid(e.0))?;
            c
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        for p in c.paths_mut() {
            *p = dir.join(&*p);
        }
        Ok(c)
    }
}

/// Environment variables that are not config overrides.
pub const RESERVED_ENV: [&str; 4] = [
    "IBFABRIC_CONFIG",
    "IBFABRIC_BIN",
    "IBFABRIC_CHAOS_LOGS",
    // OpenSM's plugin reads it, from the same environment on an SM host.
    "IBFABRIC_TABLES_DIR",
];

/// The config overrides among `vars`: `IBFABRIC_<KEY>` sets the top-level
/// key `<key>` (lower case), `IBFABRIC_<TABLE>__<KEY>` a key of a table
/// (`IBFABRIC_STORE__ENDPOINTS`). A value is read as a TOML value when it
/// is one (`8`, `true`, `["a", "b"]`, `"quoted"`), else as a string.
/// [`RESERVED_ENV`] names are not overrides.
pub fn overrides(vars: impl Iterator<Item = (String, String)>) -> Vec<(Vec<String>, String)> {
    let mut v: Vec<(Vec<String>, String)> = vars
        .filter(|(k, _)| !RESERVED_ENV.contains(&k.as_str()))
        .filter_map(|(k, val)| {
            let rest = k.strip_prefix("IBFABRIC_")?;
            let keys: Vec<String> = rest.split("__").map(str::to_lowercase).collect();
            keys.iter().all(|k| !k.is_empty()).then_some((keys, val))
        })
        .collect();
    // One order whatever the environment's: nested keys after their table.
    v.sort();
    v
}

fn env_name(keys: &[String]) -> String {
    format!("IBFABRIC_{}", keys.join("__").to_uppercase())
}

fn set(table: &mut toml::Table, keys: &[String], raw: String) -> Result<(), String> {
    // GUIDs and prefixes are written `0x...` and read from strings; TOML
    // would take the short ones for integers.
    let hex = raw.starts_with("0x") || raw.starts_with("0X");
    let value = match format!("v = {raw}").parse::<toml::Table>() {
        Ok(mut t) if !hex => t.remove("v").unwrap_or(toml::Value::String(raw)),
        _ => toml::Value::String(raw),
    };
    let (last, path) = keys.split_last().ok_or("an empty key")?;
    let mut t = table;
    for k in path {
        let entry = t
            .entry(k.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = entry
            .as_table_mut()
            .ok_or_else(|| format!("{}: {k} is not a table", env_name(keys)))?;
    }
    t.insert(last.clone(), value);
    Ok(())
}

/// `deserialize_with` for GUIDs and subnet prefixes: a string of up to 16
/// hex digits, `0x` optional (`"0xfec0000000000001"`), the notation of the
/// topology and mapping files. TOML integers are signed 64-bit, too narrow
/// for a GUID, so numbers are refused rather than half supported.
pub fn hex_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    struct Hex;
    impl Visitor<'_> for Hex {
        type Value = u64;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a hex number in a string, such as \"0xfec0000000000001\"")
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<u64, E> {
            fabric::formats::parse_hex_u64(s)
                .ok_or_else(|| E::invalid_value(Unexpected::Str(s), &self))
        }
    }
    d.deserialize_str(Hex)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Sample {
        name: String,
        #[serde(deserialize_with = "hex_u64")]
        guid: u64,
        #[serde(default)]
        file: Option<PathBuf>,
        #[serde(default)]
        dir: Option<PathBuf>,
    }

    impl ConfigFile for Sample {
        fn check(&self) -> Result<(), Invalid> {
            if self.name.is_empty() {
                return Err(Invalid("name is empty".into()));
            }
            Ok(())
        }
        fn paths_mut(&mut self) -> Vec<&mut PathBuf> {
            self.file.iter_mut().chain(self.dir.iter_mut()).collect()
        }
    }

    const OK: &str = "name = \"a\"\nguid = \"0x0004000000000001\"\n";

    #[test]
    fn hex_values_parse_with_or_without_0x() {
        let s = Sample::parse(OK, "s.toml").expect("valid");
        assert_eq!(s.guid, 0x0004_0000_0000_0001);
        let s =
            Sample::parse("name = \"a\"\nguid = \"FEC0000000000001\"\n", "s.toml").expect("no 0x");
        assert_eq!(s.guid, 0xfec0_0000_0000_0001);
    }

    #[test]
    fn errors_name_the_origin_the_line_and_the_cause() {
        let e = Sample::parse("name = \"a\"\nguid = \"zz\"\n", "s.toml").expect_err("bad hex");
        let m = e.to_string();
        assert!(m.starts_with("s.toml: "), "{m}");
        assert!(
            m.contains("line 2") && m.contains("zz") && m.contains("hex"),
            "{m}"
        );
        let e = Sample::parse("name = \"a\"\nguid = 5\n", "s.toml").expect_err("a number");
        assert!(e.to_string().contains("line 2"), "{e}");
        let e = Sample::parse(&format!("{OK}colour = 1\n"), "s.toml").expect_err("unknown key");
        assert!(e.to_string().contains("line 3") && e.to_string().contains("colour"));
        let e = Sample::parse("name = \"a\"\n", "s.toml").expect_err("missing key");
        assert!(e.to_string().contains("guid"), "{e}");
        let e = Sample::parse(&OK.replace("\"a\"", "\"\""), "s.toml").expect_err("check");
        assert_eq!(e.to_string(), "s.toml: name is empty");
    }

    #[test]
    fn load_resolves_relative_paths_against_the_file_and_keeps_absolute_ones() {
        let d = tempfile::tempdir().expect("tempdir");
        let abs = d.path().join("elsewhere");
        let p = d.path().join("s.toml");
        std::fs::write(
            &p,
            format!("{OK}file = \"t.net\"\ndir = \"{}\"\n", abs.display()),
        )
        .expect("write");
        let s = Sample::load(&p).expect("loads");
        assert_eq!(s.file, Some(d.path().join("t.net")));
        assert_eq!(s.dir, Some(abs));
        // `parse` has no file to resolve against.
        let s = Sample::parse(&format!("{OK}file = \"t.net\"\n"), "s.toml").expect("parses");
        assert_eq!(s.file, Some(PathBuf::from("t.net")));
    }

    #[test]
    fn environment_overrides_set_keys_typed_and_name_themselves_in_errors() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("s.toml");
        std::fs::write(&p, OK).expect("write");
        let vars =
            |v: &[(&str, &str)]| overrides(v.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let s = Sample::load_with(
            &p,
            vars(&[
                ("IBFABRIC_NAME", "b"),
                ("IBFABRIC_FILE", "x.net"),
                ("IBFABRIC_BIN", "/usr/bin/ibfabric"),
                ("OTHER", "1"),
            ]),
        )
        .expect("loads");
        assert_eq!(s.name, "b");
        assert_eq!(
            s.file,
            Some(d.path().join("x.net")),
            "resolved like the file's"
        );
        // A misspelt override is refused like a misspelt key, and named.
        let e = Sample::load_with(&p, vars(&[("IBFABRIC_COLOUR", "1")])).expect_err("unknown");
        assert!(
            e.to_string().contains("IBFABRIC_COLOUR") && e.to_string().contains("colour"),
            "{e}"
        );
        let e = Sample::load_with(&p, vars(&[("IBFABRIC_GUID", "zz")])).expect_err("bad hex");
        assert!(e.to_string().contains("IBFABRIC_GUID"), "{e}");
        // Nested keys and typed values.
        let mut t = toml::Table::new();
        set(
            &mut t,
            &["store".into(), "endpoints".into()],
            "[\"a\", \"b\"]".into(),
        )
        .expect("set");
        set(&mut t, &["max_vls".into()], "4".into()).expect("set");
        set(&mut t, &["guid".into()], "0x0004000000000000".into()).expect("set");
        assert_eq!(
            t["guid"].as_str(),
            Some("0x0004000000000000"),
            "hex stays a string"
        );
        assert_eq!(t["store"]["endpoints"].as_array().map(Vec::len), Some(2));
        assert_eq!(t["max_vls"].as_integer(), Some(4));
    }

    #[test]
    fn unreadable_files_name_the_file() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("absent.toml");
        let e = Sample::load(&p).expect_err("no file");
        assert!(matches!(e, ConfigError::Read { .. }));
        assert!(e.to_string().starts_with(&p.display().to_string()), "{e}");
    }
}
