//! The HTTP side of the proxy: accept Claude Code's requests, send them upstream, stream the
//! answers back.
//!
//! Requests are read whole (a request body is the conversation, at most some megabytes), since
//! the rewrite needs all of it. Answers are never read whole: the upstream body is handed to the
//! client frame by frame as it arrives, so server-sent events (pings included) reach Claude Code
//! when the API sends them.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use super::{Prepared, State, account, prepare};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Body = BoxBody<Bytes, BoxError>;

/// A request body over this is refused: no conversation is that big, and the whole body is held
/// in memory for the rewrite.
const MAX_REQUEST_BYTES: usize = 256 * 1024 * 1024;

/// The paths whose bodies carry a conversation: Claude Code's (the Messages API), and Codex's
/// (the Responses API, under whatever base path its provider's `base_url` has).
fn rewritable(method: &Method, path: &str) -> bool {
    method == Method::POST
        && (matches!(path, "/v1/messages" | "/v1/messages/count_tokens")
            || path.ends_with("/responses"))
}

/// Headers that belong to one connection, not to the request (RFC 9110, 7.6.1), and those the
/// forwarding sets itself.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "content-length"
    )
}

/// Whether a request asks to turn its connection into a WebSocket (`Upgrade: websocket`).
fn asks_websocket(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::UPGRADE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|p| p.trim().eq_ignore_ascii_case("websocket"))
}

fn copy_headers(from: &HeaderMap, to: &mut HeaderMap) {
    for (k, v) in from {
        if !hop_by_hop(k) {
            to.append(k.clone(), v.clone());
        }
    }
}

pub(super) async fn serve(state: Arc<State>) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(state.cfg.listen)
        .await
        .with_context(|| format!("listening on {}", state.cfg.listen))?;
    let addr = listener
        .local_addr()
        .context("reading the listening address")?;
    // Made before the address is printed, once: a stop sent after a caller read that line
    // (`worldfs run` stops the proxy so) is kept until the loop looks, even while it is busy
    // taking a connection. A stream made at each turn of the loop missed those (5 of 20 stops
    // under a stream of connections).
    let mut stop = StopSignals::new();
    // Scripts and tests read the address from this line (a port of 0 picks a free one).
    crate::say!(
        "worldfs: proxy on http://{addr} for the mount's socket {}, forwarding to {}{}",
        state.socket.display(),
        state.cfg.upstream,
        if state.cfg.observe {
            " (--observe: nothing rewritten)"
        } else {
            ""
        }
    );
    // Codex's calls are for OpenAI's API (or a gateway to it): Anthropic's would fail them.
    let codex = if !state.cfg.upstream.contains("api.anthropic.com") {
        format!(
            "Codex: openai_base_url = \"http://{addr}/v1\" in its config.toml, or a model \
             provider with that base_url"
        )
    } else {
        "for Codex, start the proxy with --upstream https://api.openai.com".to_owned()
    };
    crate::say!("worldfs: start Claude Code with ANTHROPIC_BASE_URL=http://{addr} ({codex})");
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = stop.recv() => return Ok(()),
        };
        let (stream, peer) = match accepted {
            Ok(s) => s,
            Err(e) => {
                // Out of descriptors, say: the listener itself is fine; try again shortly.
                tracing::warn!("accepting a connection: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        // Answers are streamed as small events; Nagle's algorithm would hold each one back
        // until the client acknowledges the previous (up to 40 ms with delayed ACKs).
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY for {peer}: {e}");
        }
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            let service = service_fn(move |req| handle(Arc::clone(&state), req));
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!("connection from {peer}: {e}");
            }
        });
    }
}

/// Ctrl-C or SIGTERM: stop taking calls (those under way are cut, as a killed proxy would).
struct StopSignals {
    term: Option<tokio::signal::unix::Signal>,
    int: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    fn new() -> StopSignals {
        use tokio::signal::unix::{SignalKind, signal};
        let listen = |kind: SignalKind, name: &str| {
            signal(kind)
                .map_err(|e| tracing::warn!("{name} cannot stop the proxy cleanly: {e}"))
                .ok()
        };
        StopSignals {
            term: listen(SignalKind::terminate(), "SIGTERM"),
            int: listen(SignalKind::interrupt(), "Ctrl-C"),
        }
    }

    /// Returns once either came (also one that came while nobody waited).
    async fn recv(&mut self) {
        async fn one(s: &mut Option<tokio::signal::unix::Signal>) {
            match s {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            () = one(&mut self.term) => {}
            () = one(&mut self.int) => {}
        }
    }
}

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    Ok(match forward(&state, req).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("{e:#}");
            error_response(StatusCode::BAD_GATEWAY, &format!("{e:#}"))
        }
    })
}

/// An error in the API's own shape, so Claude Code shows it as it shows the API's errors.
fn error_response(status: StatusCode, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "type": "error",
        "error": {"type": "api_error", "message": format!("worldfs proxy: {message}")},
    });
    let mut r = Response::new(
        Full::new(Bytes::from(body.to_string()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

async fn forward(state: &Arc<State>, req: Request<Incoming>) -> anyhow::Result<Response<Body>> {
    let (parts, body) = req.into_parts();
    // Codex's `openai` provider first asks for a WebSocket to send its calls over: their
    // frames would pass unread, with no history replaced. Refused with 426, Codex sends its
    // calls over HTTP at once (observed, 0.171); any other refusal, and it asks again for
    // about seven seconds at every start.
    if asks_websocket(&parts.headers) {
        tracing::info!(
            "{}: a WebSocket was asked for: refused (426), so the calls come over HTTP",
            parts.uri.path()
        );
        return Ok(error_response(
            StatusCode::UPGRADE_REQUIRED,
            "WebSockets are not forwarded; send the request over HTTP",
        ));
    }
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_owned(), |p| p.as_str().to_owned());
    let body = match Limited::new(body, MAX_REQUEST_BYTES).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            let status = if e.is::<LengthLimitError>() {
                StatusCode::PAYLOAD_TOO_LARGE
            } else {
                StatusCode::BAD_REQUEST
            };
            return Ok(error_response(
                status,
                &format!("reading the request body: {e}"),
            ));
        }
    };
    let path = parts.uri.path().to_owned();
    let body = if rewritable(&parts.method, &path) {
        let state2 = Arc::clone(state);
        let original = body.clone();
        let header = if path.ends_with("/responses") {
            super::session::CODEX_HEADER
        } else {
            super::session::HEADER
        };
        let session = parts.headers.get(header).map(|v| v.as_bytes().to_vec());
        let subagent = parts.headers.contains_key(super::rewrite::AGENT_HEADER);
        let coding = super::encoding::of(&parts.headers);
        let (prepared, call) = tokio::task::spawn_blocking(move || {
            prepare(
                &state2,
                &path,
                &original,
                coding,
                session.as_deref(),
                subagent,
            )
        })
        .await
        .unwrap_or_else(|e| {
            tracing::warn!("preparing the request failed: {e}");
            state.counts.failed.fetch_add(1, Ordering::Relaxed);
            (Prepared::Untouched, None)
        });
        if let Some(call) = call {
            // Bookkeeping, after the call: it must not delay it.
            let state3 = Arc::clone(state);
            state.recording.fetch_add(1, Ordering::SeqCst);
            tokio::task::spawn_blocking(move || {
                account::record(&state3, &call);
                state3.recording.fetch_sub(1, Ordering::SeqCst);
            });
        }
        match prepared {
            Prepared::Rewritten(b) => b,
            Prepared::Untouched => body,
        }
    } else {
        body
    };
    let url = format!(
        "{}{}",
        state.cfg.upstream.trim_end_matches('/'),
        path_and_query
    );
    let mut headers = HeaderMap::new();
    copy_headers(&parts.headers, &mut headers);
    let upstream = state
        .client
        .request(parts.method.clone(), &url)
        .headers(headers)
        .body(body)
        .send()
        .await
        .with_context(|| format!("sending {} {url}", parts.method))?;
    let mut resp: Response<reqwest::Body> = upstream.into();
    let mut out_headers = HeaderMap::new();
    copy_headers(resp.headers(), &mut out_headers);
    *resp.headers_mut() = out_headers;
    Ok(resp.map(|b| b.map_err(|e| Box::new(e) as BoxError).boxed()))
}
