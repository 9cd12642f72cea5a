//! The web surface: a page for people, served on the host's HTTP listener at `/`, that shows the
//! tasks the viewer's principal may see, live (server-sent events, no polling in the page): each
//! task's status, command, owner (by name) and times, the output tail and details of the one
//! selected, a kill button per row, the tasks lost by an earlier host, a timeline, and for an
//! overseer (a token made with `--all-owners`) the plugins with their generations and the host's
//! health. Everything it serves is embedded here; the page loads nothing from elsewhere. The page
//! signs in by itself from the link's fragment (`/#token=TOKEN`) or its form, and keeps the token
//! in `localStorage`.
//!
//! Rooms: `api` answers requests, `colours` parses output's colours into runs, `rows` turns
//! snapshots into rows (owners named by the host), `stream` is the event stream's step; `assets/`
//! holds the page, its script and its style.

use taskhost_abi::prelude::*;
use taskhost_abi::sdk::http::{Events, EventsRequest, HttpHandler, HttpRequest, HttpResponse};

mod api;
mod colours;
mod rows;
mod stream;

/// The page, its script and its style, embedded at build time. The script is one file served,
/// written in four by what they hold: the page (`app.js`), the output pane, the timeline, a task's
/// details.
const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS: &str = concat!(
    include_str!("../assets/app.js"),
    include_str!("../assets/output.js"),
    include_str!("../assets/timeline.js"),
    include_str!("../assets/details.js"),
);
const APP_CSS: &str = include_str!("../assets/app.css");

struct Web;

impl Plugin for Web {}

/// The routes under `/`.
struct Routes {
    host: Host,
}

impl HttpHandler for Routes {
    /// The page, its script and its style: the same for everyone, served with no token (the page
    /// signs in by itself).
    fn asset(&self, path: &str) -> Option<HttpResponse> {
        let (content_type, body) = match path {
            "/" => ("text/html; charset=utf-8", INDEX_HTML),
            "/app.js" => ("text/javascript; charset=utf-8", APP_JS),
            "/app.css" => ("text/css; charset=utf-8", APP_CSS),
            _ => return None,
        };
        Some(HttpResponse::ok(content_type, body))
    }

    fn request(&self, request: HttpRequest) -> HttpResponse {
        api::answer(&self.host, &request)
    }

    fn events(&self, request: EventsRequest) -> Events {
        if request.path != "/api/events" {
            return Events {
                end: true,
                ..Events::default()
            };
        }
        stream::step(&self.host, &request)
    }
}

fn init(host: Host) -> Result<Web, String> {
    host.serve_http("/", Routes { host: host.clone() })?;
    host.attach_surface("web");
    Ok(Web)
}

export_plugin!(name: "web", init: init);
