//! The Unix socket through which harnesses get the projection and tell the world about the
//! session: newline-delimited JSON-RPC 2.0, documented in `docs/protocol.md`.
//!
//! One concept per file: `paths` (where the socket lives), `server` (accept loop, connections,
//! peer credentials, limits), `protocol` (framing and errors), `methods` (dispatch, and a file
//! per family of methods), `commands` (command-output validity), `subscriptions` (observation
//! notifications), `metrics` (latency and token accounting), `render` (the seam to the
//! projection renderers), `render_cache` (rendered projections reused while nothing they
//! depend on changed), `client` (what the CLI uses), `fit` (what clients cut to fit a request
//! line).

pub mod begun;
pub mod client;
pub mod commands;
pub mod fit;
pub mod methods;
pub mod metrics;
pub mod paths;
pub mod protocol;
pub mod render;
pub mod render_cache;
pub mod server;
mod stop;
pub mod subscriptions;

pub use client::{Client, ClientError};
pub use methods::{DaemonInfo, METHODS, Shared};
pub use paths::{candidate_paths, default_socket_path};
pub use protocol::{RpcError, code};
pub use render::{Format, ProjectionParams, Projections, Rendered, Renderer, StandIn};
pub use server::{Server, ServerError, ServerOptions};
