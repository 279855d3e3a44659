//! Write commands as they travel through the Raft log. A command is encoded once by the
//! proposer (bincode) and decoded by the apply loop; its encoding is the log entry's data.

use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::kv::KeyRange;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompareOp {
    Equal,
    NotEqual,
    Less,
    Greater,
}

impl CompareOp {
    pub fn parse(op: &str) -> Result<Self> {
        match op {
            "=" => Ok(Self::Equal),
            "!=" => Ok(Self::NotEqual),
            "<" => Ok(Self::Less),
            ">" => Ok(Self::Greater),
            other => Err(StoreError::InvalidArgument(format!(
                "unknown compare operator {other:?}; use one of \"=\", \"!=\", \"<\", \">\""
            ))),
        }
    }

    pub fn holds<T: Ord + ?Sized>(self, actual: &T, target: &T) -> bool {
        match self {
            Self::Equal => actual == target,
            Self::NotEqual => actual != target,
            Self::Less => actual < target,
            Self::Greater => actual > target,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompareTarget {
    Value(#[serde(with = "serde_bytes")] Vec<u8>),
    Version(i64),
    CreateRevision(i64),
    ModRevision(i64),
    Lease(i64),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compare {
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    pub op: CompareOp,
    pub target: CompareTarget,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutRequest {
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    #[serde(with = "serde_bytes")]
    pub value: Vec<u8>,
    pub lease: i64,
    pub prev_kv: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RangeRequest {
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    pub end: Option<serde_bytes::ByteBuf>,
    pub revision: i64,
    pub limit: i64,
    pub keys_only: bool,
    pub count_only: bool,
}

impl RangeRequest {
    pub fn key_range(&self) -> KeyRange {
        KeyRange::new(self.key.clone(), self.end.clone().map(|b| b.into_vec()))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteRequest {
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    pub end: Option<serde_bytes::ByteBuf>,
    pub prev_kv: bool,
}

impl DeleteRequest {
    pub fn key_range(&self) -> KeyRange {
        KeyRange::new(self.key.clone(), self.end.clone().map(|b| b.into_vec()))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RequestOp {
    Put(PutRequest),
    Range(RangeRequest),
    Delete(DeleteRequest),
}

impl RequestOp {
    pub fn is_write(&self) -> bool {
        !matches!(self, Self::Range(_))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct TxnRequest {
    pub compare: Vec<Compare>,
    pub success: Vec<RequestOp>,
    pub failure: Vec<RequestOp>,
}

impl TxnRequest {
    pub fn single(op: RequestOp) -> Self {
        Self { compare: Vec::new(), success: vec![op], failure: Vec::new() }
    }

    /// A transaction that cannot write is served without going through the log.
    pub fn is_read_only(&self) -> bool {
        !self.success.iter().chain(&self.failure).any(RequestOp::is_write)
    }
}

/// Everything that changes the state machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    Txn(TxnRequest),
    Compact(i64),
    /// `id == 0`: the apply loop picks the next free id.
    LeaseGrant { id: i64, ttl: i64 },
    LeaseRevoke(i64),
}

impl Command {
    pub fn encode(&self) -> Vec<u8> {
        bincode::serialize(self).expect("commands always encode")
    }

    pub fn decode(data: &[u8]) -> Result<Self> {
        bincode::deserialize(data)
            .map_err(|e| StoreError::Corruption(format!("undecodable log entry: {e}")))
    }
}
