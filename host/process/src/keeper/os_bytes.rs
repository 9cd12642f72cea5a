//! `OsString`s and paths as their bytes, for serde: its own forms are tagged by platform (`OsString`)
//! or refuse what is not UTF-8 (`PathBuf`), and a launch's program, arguments and environment need
//! neither be.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_bytes::{ByteBuf, Bytes};

fn bytes(s: &OsString) -> &Bytes {
    Bytes::new(s.as_bytes())
}

fn owned(b: ByteBuf) -> OsString {
    OsString::from_vec(b.into_vec())
}

/// A path as its bytes.
pub(crate) fn path<S: Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    Bytes::new(p.as_os_str().as_bytes()).serialize(s)
}

/// A path from its bytes.
pub(crate) fn to_path<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
    ByteBuf::deserialize(d).map(|b| PathBuf::from(owned(b)))
}

/// A path, if any, as its bytes.
pub(crate) fn optional_path<S: Serializer>(p: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
    p.as_ref()
        .map(|p| Bytes::new(p.as_os_str().as_bytes()))
        .serialize(s)
}

/// A path, if any, from its bytes.
pub(crate) fn to_optional_path<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<PathBuf>, D::Error> {
    Option::<ByteBuf>::deserialize(d).map(|b| b.map(|b| PathBuf::from(owned(b))))
}

/// Strings as their bytes.
pub(crate) fn list<S: Serializer>(v: &[OsString], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(bytes))
}

/// Strings from their bytes.
pub(crate) fn to_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<OsString>, D::Error> {
    Vec::<ByteBuf>::deserialize(d).map(|v| v.into_iter().map(owned).collect())
}

/// Pairs of strings (an environment) as their bytes.
pub(crate) fn pairs<S: Serializer>(v: &[(OsString, OsString)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|(k, v)| (bytes(k), bytes(v))))
}

/// Pairs of strings from their bytes.
pub(crate) fn to_pairs<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<(OsString, OsString)>, D::Error> {
    Vec::<(ByteBuf, ByteBuf)>::deserialize(d)
        .map(|v| v.into_iter().map(|(k, v)| (owned(k), owned(v))).collect())
}
