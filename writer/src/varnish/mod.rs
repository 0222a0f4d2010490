//! The writer's side of Varnish: the VCL it generates, and the purges that
//! tell every node at once when a link changes.
//!
//! | file | what |
//! | --- | --- |
//! | `vcl.rs` | the VCL generated from the configuration and the `.in` templates |
//! | `routes.rs` | the VCL's per-domain parts: routes by `Host` and path, forwarding, redirects |
//! | `links.vcl.in`, `standalone.vcl.in`, `include.vcl.in` | the templates: the links' part, and the two forms around it |
//! | `purge.rs` | the nodes and the `PURGE` sent to each |
//! | `purge_queue.rs` | the purges a node did not confirm, kept in Redis and sent again |
//!
//! It uses the configuration and the connections to Redis; the shortener
//! and the command line use it.

pub mod purge;
pub mod purge_queue;
mod routes;
pub mod vcl;
