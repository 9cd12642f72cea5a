//! Integration tests: real cdylibs loaded by the real host. Build the workspace first (`scripts/test`
//! does), so the test plugins exist next to this binary.

#![allow(clippy::unwrap_used, reason = "in a test, an unwrap is an assertion")]

mod activation;
mod authoring;
mod bash;
mod bounds_escape;
mod bounds_fs;
mod bounds_git;
mod bounds_handover;
mod bounds_limits;
mod bounds_tmp;
mod clients;
mod crash_reads;
mod descriptors;
mod disk_full;
mod faults;
mod fixtures;
mod handover;
mod hardening;
mod host_errors;
mod http;
mod http_bounds;
mod http_caps;
mod http_wire;
mod interactive;
mod items;
mod keeper;
mod keeper_reach;
mod legacy_tasks;
mod lifecycle;
mod loading;
mod loud_starts;
mod mcp;
mod mcp_tasks;
mod overlap;
mod owners;
mod policy;
mod queue;
mod reload;
mod slurm;
mod state;
mod state_hardening;
mod state_lost;
mod subagent;
mod terminal;
mod upgrade_binary;
mod upgrade_foreground;
mod upgrade_modern;
mod watch;
mod web;
mod web_browser;
mod web_details;
mod web_sign_in;
mod web_sign_in_links;
mod web_view;
