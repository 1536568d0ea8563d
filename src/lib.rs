//! worldfs: a FUSE passthrough file system that records what a coding agent reads and writes.
//!
//! Data flows one way: kernel -> [`fs`] (passthrough, emits [`observation`]s without blocking)
//! -> bounded channel -> world cache -> projection -> socket.

pub mod claude_hook;
pub mod cli;
pub mod cli_client;
pub mod cli_watch;
pub mod debug_pause;
pub mod fs;
pub mod holders;
pub mod mount;
pub mod mountinfo;
pub mod observation;
pub mod proc_stat;
pub mod projection;
pub mod proxy;
pub mod replay;
pub mod run;
pub mod runtime;
pub mod say;
pub mod socket;
pub mod watchdog;
pub mod world;
