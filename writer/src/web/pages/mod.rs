//! The HTML pages for people, each a page module with its handler, and a
//! script file where the page runs one:
//!
//! | file | what |
//! | --- | --- |
//! | `form.rs` | the form's handlers: the page, its post, its CSV upload |
//! | `page.rs` | the form page drawn, and the style every page shares |
//! | `campaign.rs` | `utm_*` parameters added to a target, the forwarding choice |
//! | `manage.rs`, `manage.js`, `manage_rules.js` | the management page and its script (the list and dialogs, then the rules and split editor, sent as one) |
//! | `stats_page.rs`, `stats.js` | a link's statistics page and its script |
//!
//! The pages hold no data but the form's outcome: the management and
//! statistics pages ask the JSON API for everything.

pub mod campaign;
pub mod form;
pub mod manage;
pub mod page;
pub mod stats_page;
