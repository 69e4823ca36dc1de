//! Error types of the core library. Parse errors always carry the file,
//! line and cause so that operators can fix their input.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("no node with id {0}")]
    NoSuchNode(u32),
    #[error("node '{node}' has no port {port} (it has ports 1..={num_ports})")]
    BadPort {
        node: String,
        port: u8,
        num_ports: u8,
    },
    #[error("port {1} of '{0}' is linked to itself")]
    SelfLink(String, u8),
    #[error("port {port} of '{node}' is already linked to another port")]
    PortInUse { node: String, port: u8 },
    #[error("GUID 0x{guid:016x} is used by both '{first}' and '{second}'")]
    DuplicateGuid {
        guid: u64,
        first: String,
        second: String,
    },
    #[error("port GUID 0x{guid:016x} is used by both {first} and {second}")]
    DuplicatePortGuid {
        guid: u64,
        first: String,
        second: String,
    },
    #[error("LID {0} is assigned twice")]
    DuplicateLid(u16),
    #[error("LID {lid} with LMC {lmc} is not a multiple of {}: a port's 2^LMC LIDs start aligned", 1u32 << lmc)]
    LidNotAligned { lid: u16, lmc: u8 },
    #[error("LMC {0} is above 7")]
    LmcOutOfRange(u8),
    #[error("LID {0} is outside the unicast range 1..=49151")]
    LidOutOfRange(u16),
    #[error("the subnet needs more than 49151 unicast LIDs")]
    OutOfLids,
}

/// A located input error: `file:line: cause`.
#[derive(Debug, thiserror::Error)]
#[error("{}:{line}: {cause}", file.display())]
pub struct ParseError {
    pub file: PathBuf,
    pub line: usize,
    pub cause: String,
}

impl ParseError {
    pub fn new(file: impl Into<PathBuf>, line: usize, cause: impl Into<String>) -> Self {
        Self {
            file: file.into(),
            line,
            cause: cause.into(),
        }
    }
}

/// A located error in a binary file: `file: offset N: cause`.
#[derive(Debug, thiserror::Error)]
#[error("{}: offset {offset}: {cause}", file.display())]
pub struct BinaryError {
    pub file: PathBuf,
    pub offset: u64,
    pub cause: String,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Parse(#[from] ParseError),
    #[error(transparent)]
    Binary(#[from] BinaryError),
    /// A subnet's tables the verification gate refused (cycle, unrouted
    /// pairs): unsafe tables, not a failure to compute them.
    #[error("engine '{engine}' gives subnet '{subnet}' tables the verifier refuses: {refusal}")]
    SubnetRefused {
        engine: String,
        subnet: String,
        refusal: String,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {source}", file.display())]
    Model {
        file: PathBuf,
        #[source]
        source: ModelError,
    },
    #[error(transparent)]
    Write(#[from] crate::fsio::WriteError),
    #[error("invalid generator parameters: {0}")]
    Generator(String),
    #[error("routing engine '{engine}' failed: {reason}")]
    Routing { engine: String, reason: String },
    #[error("unknown routing engine '{0}' (known: {1})")]
    UnknownEngine(String, String),
    #[error("{0}")]
    Invalid(String),
    #[error("multi-subnet fabric: {0}")]
    Multi(String),
    #[error("inter-subnet routing '{algorithm}': {reason}")]
    InterSubnet { algorithm: String, reason: String },
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
