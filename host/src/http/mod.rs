//! MCP over Streamable HTTP (`serve --listen http://HOST:PORT`): rmcp's service at `/mcp`, both
//! protocol eras (a 2026-07-28 request is served on its own, statelessly; earlier versions get
//! sessions), behind a bearer-token gate that names each request's principal, the owner of the tasks
//! it starts (see [`crate::mcp::PrincipalOwners`]). The resource's RFC 9728 metadata is served at
//! its well-known path, and a refused request is told where to find it. Loopback addresses serve
//! plain HTTP; any other needs TLS (`--tls-cert`, `--tls-key`) or `--insecure-http`. Every other
//! path goes to the plugin routes (a surface for people, such as `web`): the page's assets to anyone,
//! the rest behind the bearer token the page keeps and sends itself.

mod address;
mod auth;
mod authority;
mod bounds;
mod connection;
mod guarded;
mod layer;
mod proof;
mod routes;
mod section;
mod serving;
mod sessions;
mod slots;
mod tls;
mod viewer;

pub use address::HttpAddress;
pub use section::HttpSection;
pub use serving::{HttpListener, HttpServing, serve_http};
