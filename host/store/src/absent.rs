//! The store as a build without SQLite has it: a type with no values, so every `Option<Arc<Store>>`
//! is `None` and every method here is unreachable (its body matches on `self`, which cannot be).

use std::path::PathBuf;
use std::sync::Arc;

use taskhost_process::Drawn;
use taskhost_process::private_dir::HeldDir;
use taskhost_registry::Journal;

use crate::{ExternalRecord, ForegroundRecord, OwnerSecret, Principal, StoreError, TaskRecord};

/// The store, which this build (without the `sqlite` feature) cannot open: it has no values.
#[derive(Debug)]
pub enum Store {}

/// The methods the engine calls, with the SQLite store's signatures (each documented there).
#[expect(
    missing_docs,
    clippy::missing_errors_doc,
    reason = "unreachable: see the store's"
)]
impl Store {
    pub fn journal(&self) -> Result<Arc<dyn Journal>, StoreError> {
        match *self {}
    }
    pub fn lost(&self) -> Option<&str> {
        match *self {}
    }
    pub fn close(&self) {
        match *self {}
    }
    pub fn held_dir(&self) -> &HeldDir {
        match *self {}
    }
    pub fn output_dir(&self) -> Arc<HeldDir> {
        match *self {}
    }
    pub fn mint_owner(&self, _secret: Option<&OwnerSecret>) -> Result<String, StoreError> {
        match *self {}
    }
    pub fn owner_of(&self, _secret: &OwnerSecret) -> Result<Option<String>, StoreError> {
        match *self {}
    }
    pub fn end_owner(&self, _name: &str) {
        match *self {}
    }
    pub fn owner_tasks(&self, _name: &str) -> Result<Vec<TaskRecord>, StoreError> {
        match *self {}
    }
    pub fn principals(&self) -> Result<Vec<Principal>, StoreError> {
        match *self {}
    }
    pub fn policy_of_principal(&self, _owner: &str) -> Result<Option<String>, StoreError> {
        match *self {}
    }
    pub fn task(&self, _id: &str) -> Result<Option<TaskRecord>, StoreError> {
        match *self {}
    }
    pub fn newest_tasks(
        &self,
        _owner: Option<&str>,
        _limit: u64,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        match *self {}
    }
    pub fn kept_tail(
        &self,
        _record: &TaskRecord,
        _max_bytes: u64,
        _from: [u64; 2],
    ) -> std::io::Result<String> {
        match *self {}
    }
    pub fn kept_tail_drawn(
        &self,
        _record: &TaskRecord,
        _max_bytes: u64,
        _from: [u64; 2],
        _drawn: Drawn,
    ) -> std::io::Result<String> {
        match *self {}
    }
    pub fn set_output(&self, _id: &str, _files: [Option<PathBuf>; 2]) {
        match *self {}
    }
    pub fn read_to(&self, _id: &str, _out: u64, _err: u64) {
        match *self {}
    }
    pub fn told(&self, _id: &str) {
        match *self {}
    }
    pub fn set_external(&self, _id: &str, _record: ExternalRecord) {
        match *self {}
    }
    pub fn external_read(&self, _id: &str, _offset: u64) {
        match *self {}
    }
    pub fn queue_task(&self, _id: &str, _spec: String) {
        match *self {}
    }
    pub fn unqueue(&self, _id: &str) {
        match *self {}
    }
    pub fn park_queued(&self, _id: &str) {
        match *self {}
    }
    pub fn foreground_began(&self, _record: ForegroundRecord) -> Option<u64> {
        match *self {}
    }
    pub fn foreground_ended(&self, _id: u64) {
        match *self {}
    }
    pub fn taken_over(&self) -> &[TaskRecord] {
        match *self {}
    }
    pub fn taken_foregrounds(&self) -> &[ForegroundRecord] {
        match *self {}
    }
    pub fn unheld<'a>(&self, _ids: impl IntoIterator<Item = &'a str>) {
        match *self {}
    }
}
