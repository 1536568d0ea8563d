//! JSON-RPC 2.0 over newline-delimited lines: reading bounded lines, parsing requests (single or
//! batch), and the error codes.
//!
//! Lenient where it costs nothing (a missing `"jsonrpc"` member, `\r\n` line ends, blank lines),
//! strict where a mistake would otherwise go unnoticed (a wrong `"jsonrpc"` value, an `id` that
//! is not a string or number, params that are not an object).

use std::io::{self, BufRead};
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

/// Longest request line accepted (without its newline).
pub const MAX_LINE: usize = 1 << 20;
/// Most requests in one batch: a batch is answered in one line, which must stay reasonable.
pub const MAX_BATCH: usize = 256;

/// Error codes: the JSON-RPC ones and ours (-32000..-32099 are for servers).
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL: i64 = -32603;
    /// The request line exceeded [`super::MAX_LINE`].
    pub const LINE_TOO_LONG: i64 = -32000;
    /// No such entry, subscription or command.
    pub const NOT_FOUND: i64 = -32001;
    /// A path outside the root, a withheld or ignored file.
    pub const REFUSED: i64 = -32002;
    /// The projection could not be rendered with these parameters.
    pub const PROJECTION_FAILED: i64 = -32003;
    /// Too many connections, the peer is not allowed, or the world is too far behind the mount.
    pub const UNAVAILABLE: i64 = -32004;
    /// The world's record of recent observations no longer covers what was asked.
    pub const HISTORY_LOST: i64 = -32005;
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn parse(msg: impl std::fmt::Display) -> Self {
        Self::new(code::PARSE_ERROR, format!("parse error: {msg}"))
    }

    pub fn invalid_request(msg: impl std::fmt::Display) -> Self {
        Self::new(code::INVALID_REQUEST, format!("invalid request: {msg}"))
    }

    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            code::METHOD_NOT_FOUND,
            format!("unknown method {method:?} (`initialize` lists the methods)"),
        )
    }

    pub fn invalid_params(msg: impl std::fmt::Display) -> Self {
        Self::new(code::INVALID_PARAMS, format!("invalid params: {msg}"))
    }

    pub fn internal(msg: impl std::fmt::Display) -> Self {
        Self::new(code::INTERNAL, format!("internal error: {msg}"))
    }

    pub fn not_found(msg: impl std::fmt::Display) -> Self {
        Self::new(code::NOT_FOUND, msg.to_string())
    }

    pub fn refused(msg: impl std::fmt::Display) -> Self {
        Self::new(code::REFUSED, msg.to_string())
    }

    pub fn line_too_long(len: u64) -> Self {
        Self::new(
            code::LINE_TOO_LONG,
            format!(
                "request line longer than {MAX_LINE} bytes (at least {len} read); it was \
                 discarded up to its newline"
            ),
        )
        .with_data(serde_json::json!({ "max_line_bytes": MAX_LINE }))
    }
}

/// A well-formed request. `id: None` is a notification (no response is sent).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub id: Option<Value>,
    pub method: String,
    /// Always an object; absent or null params become `{}`.
    pub params: Value,
}

/// One entry of what a line held: a request, or why it is not one (with the id to answer to).
pub type Parsed = Result<Request, (Value, RpcError)>;

/// What one line held.
#[derive(Debug)]
pub enum Incoming {
    Single(Parsed),
    Batch(Vec<Parsed>),
}

/// Parses one line (without its newline).
pub fn parse_line(line: &[u8]) -> Incoming {
    let v: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => return Incoming::Single(Err((Value::Null, RpcError::parse(e)))),
    };
    match v {
        Value::Array(items) => {
            if items.is_empty() {
                return Incoming::Single(Err((
                    Value::Null,
                    RpcError::invalid_request("empty batch"),
                )));
            }
            if items.len() > MAX_BATCH {
                return Incoming::Single(Err((
                    Value::Null,
                    RpcError::invalid_request(format!(
                        "batch of {} requests; at most {MAX_BATCH} per line",
                        items.len()
                    )),
                )));
            }
            Incoming::Batch(items.into_iter().map(parse_request).collect())
        }
        other => Incoming::Single(parse_request(other)),
    }
}

/// Checks one request object.
pub fn parse_request(v: Value) -> Parsed {
    let Value::Object(mut obj) = v else {
        return Err((
            Value::Null,
            RpcError::invalid_request("expected a JSON object (or an array of them)"),
        ));
    };
    let id = match obj.remove("id") {
        None => None,
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => Some(id),
        Some(_) => {
            return Err((
                Value::Null,
                RpcError::invalid_request("\"id\" must be a string, a number or null"),
            ));
        }
    };
    let reply_to = id.clone().unwrap_or(Value::Null);
    match obj.get("jsonrpc") {
        None => {}
        Some(Value::String(s)) if s == "2.0" => {}
        Some(other) => {
            return Err((
                reply_to,
                RpcError::invalid_request(format!("\"jsonrpc\" must be \"2.0\", got {other}")),
            ));
        }
    }
    let method = match obj.remove("method") {
        Some(Value::String(m)) => m,
        Some(_) => {
            return Err((
                reply_to,
                RpcError::invalid_request("\"method\" must be a string"),
            ));
        }
        None => return Err((reply_to, RpcError::invalid_request("missing \"method\""))),
    };
    let params = match obj.remove("params") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(p @ Value::Object(_)) => p,
        Some(Value::Array(_)) => {
            return Err((
                reply_to,
                RpcError::invalid_params("params must be an object (named parameters)"),
            ));
        }
        Some(_) => {
            return Err((
                reply_to,
                RpcError::invalid_request("\"params\" must be an object"),
            ));
        }
    };
    Ok(Request { id, method, params })
}

/// What a method answers: a JSON value, or a result already serialized (a reused projection:
/// tens of kilobytes that would otherwise be cloned and serialized again on every call).
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Value(Value),
    /// The compact JSON of a result, exactly as `serde_json::to_string` wrote it.
    Json(Arc<str>),
}

impl Reply {
    /// The reply as a value (for batches, which are rare enough to pay for a parse).
    pub fn into_value(self) -> Value {
        match self {
            Reply::Value(v) => v,
            // Our own serializer wrote it; failing to read it back would be a bug, answered as
            // null rather than a panic.
            Reply::Json(s) => serde_json::from_str(&s).unwrap_or(Value::Null),
        }
    }
}

impl From<Value> for Reply {
    fn from(v: Value) -> Self {
        Reply::Value(v)
    }
}

#[derive(Serialize)]
struct Response<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a RpcError>,
}

impl<'a> Response<'a> {
    fn of(id: &'a Value, outcome: Result<&'a Value, &'a RpcError>) -> Self {
        Response {
            jsonrpc: "2.0",
            id,
            result: outcome.ok(),
            error: outcome.err(),
        }
    }
}

/// A response object.
pub fn response(id: &Value, outcome: &Result<Value, RpcError>) -> Value {
    // Serializing plain JSON values and strings cannot fail.
    serde_json::to_value(Response::of(id, outcome.as_ref())).unwrap_or(Value::Null)
}

/// A response as one line, newline included, serialized straight from `outcome` (a projection
/// is tens of kilobytes: no intermediate copy of it). A pre-serialized result is copied in as
/// is, giving the same bytes as serializing the value it was made from.
pub fn response_line(id: &Value, outcome: &Result<Reply, RpcError>) -> Vec<u8> {
    match outcome {
        Ok(Reply::Json(result)) => {
            let id = serde_json::to_vec(id).unwrap_or_else(|_| b"null".to_vec());
            let mut out =
                Vec::with_capacity(RAW_HEAD.len() + id.len() + RAW_MID.len() + result.len() + 2);
            out.extend_from_slice(RAW_HEAD);
            out.extend_from_slice(&id);
            out.extend_from_slice(RAW_MID);
            out.extend_from_slice(result.as_bytes());
            out.extend_from_slice(b"}\n");
            out
        }
        Ok(Reply::Value(v)) => line(serde_json::to_vec(&Response::of(id, Ok(v)))),
        Err(e) => line(serde_json::to_vec(&Response::of(id, Err(e)))),
    }
}

/// What [`Response`] serializes to around its id and result (field order: jsonrpc, id, result).
const RAW_HEAD: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":";
const RAW_MID: &[u8] = b",\"result\":";

fn line(json: serde_json::Result<Vec<u8>>) -> Vec<u8> {
    let mut out = json.unwrap_or_else(|_| b"null".to_vec());
    out.push(b'\n');
    out
}

/// `value` as one line, newline included.
pub fn to_line(value: &Value) -> Vec<u8> {
    line(serde_json::to_vec(value))
}

/// A notification line.
pub fn notification(method: &str, params: Value) -> Vec<u8> {
    to_line(&serde_json::json!({ "jsonrpc": "2.0", "method": method, "params": params }))
}

/// What [`LineReader::next_line`] got.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    Data(Vec<u8>),
    /// The line exceeded the limit; the rest of it will be skipped silently.
    TooLong {
        len: u64,
    },
    Eof,
}

/// Reads newline-terminated lines of at most `max` bytes. An over-long line is reported as soon
/// as it crosses the limit and then discarded up to its newline without being buffered, so a
/// client cannot make the server hold more than `max` bytes per connection.
pub struct LineReader<R> {
    inner: R,
    max: usize,
    buf: Vec<u8>,
    /// Skipping the rest of an over-long line.
    discarding: bool,
}

impl<R: BufRead> LineReader<R> {
    pub fn new(inner: R, max: usize) -> Self {
        Self {
            inner,
            max,
            buf: Vec::new(),
            discarding: false,
        }
    }

    pub fn next_line(&mut self) -> io::Result<Line> {
        self.buf.clear();
        loop {
            let avail = match self.inner.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if avail.is_empty() {
                self.discarding = false;
                if self.buf.is_empty() {
                    return Ok(Line::Eof);
                }
                return Ok(Line::Data(std::mem::take(&mut self.buf)));
            }
            let newline = avail.iter().position(|&b| b == b'\n');
            let take = newline.unwrap_or(avail.len());
            if self.discarding {
                self.inner.consume(take + usize::from(newline.is_some()));
                if newline.is_some() {
                    self.discarding = false;
                }
                continue;
            }
            if self.buf.len() + take > self.max {
                let len = (self.buf.len() + take) as u64;
                self.buf = Vec::new();
                self.inner.consume(take + usize::from(newline.is_some()));
                self.discarding = newline.is_none();
                return Ok(Line::TooLong { len });
            }
            self.buf.extend_from_slice(&avail[..take]);
            self.inner.consume(take + usize::from(newline.is_some()));
            if newline.is_some() {
                if self.buf.last() == Some(&b'\r') {
                    self.buf.pop();
                }
                return Ok(Line::Data(std::mem::take(&mut self.buf)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufReader, Cursor};

    use super::*;

    fn ok(p: Parsed) -> Request {
        p.unwrap_or_else(|(_, e)| panic!("{e:?}"))
    }

    fn err(p: Parsed) -> (Value, RpcError) {
        match p {
            Ok(r) => panic!("accepted {r:?}"),
            Err(e) => e,
        }
    }

    fn single(line: &str) -> Parsed {
        match parse_line(line.as_bytes()) {
            Incoming::Single(p) => p,
            Incoming::Batch(_) => panic!("batch"),
        }
    }

    #[test]
    fn accepts_missing_jsonrpc_and_defaults_params() {
        let r = ok(single(r#"{"id":1,"method":"stats"}"#));
        assert_eq!(r.id, Some(Value::from(1)));
        assert_eq!(r.params, serde_json::json!({}));
        let n = ok(single(
            r#"{"jsonrpc":"2.0","method":"goal.set","params":{"goal":"x"}}"#,
        ));
        assert_eq!(n.id, None, "no id: a notification");
    }

    #[test]
    fn rejects_malformed_requests_with_the_right_codes() {
        assert_eq!(err(single("{")).1.code, code::PARSE_ERROR);
        assert_eq!(err(single("[]")).1.code, code::INVALID_REQUEST);
        assert_eq!(err(single("42")).1.code, code::INVALID_REQUEST);
        let (id, e) = err(single(r#"{"id":"a","jsonrpc":"1.0","method":"x"}"#));
        assert_eq!((id, e.code), (Value::from("a"), code::INVALID_REQUEST));
        assert_eq!(
            err(single(r#"{"id":{},"method":"x"}"#)).1.code,
            code::INVALID_REQUEST
        );
        assert_eq!(err(single(r#"{"id":1}"#)).1.code, code::INVALID_REQUEST);
        assert_eq!(
            err(single(r#"{"id":1,"method":"x","params":[1]}"#)).1.code,
            code::INVALID_PARAMS
        );
        assert_eq!(
            err(single(r#"{"id":1,"method":7}"#)).1.code,
            code::INVALID_REQUEST
        );
    }

    #[test]
    fn batches_are_parsed_item_by_item() {
        match parse_line(br#"[{"id":1,"method":"a"},5,{"method":"b"}]"#) {
            Incoming::Batch(v) => {
                assert_eq!(v.len(), 3);
                assert!(v[0].is_ok() && v[1].is_err() && v[2].is_ok());
            }
            Incoming::Single(_) => panic!("not a batch"),
        }
        let big = format!("[{}]", vec!["{\"method\":\"a\"}"; MAX_BATCH + 1].join(","));
        assert!(matches!(
            parse_line(big.as_bytes()),
            Incoming::Single(Err(_))
        ));
    }

    #[test]
    fn responses_carry_result_or_error() {
        let v = response(&Value::from(3), &Ok(serde_json::json!({"a":1})));
        assert_eq!(
            v,
            serde_json::json!({"jsonrpc":"2.0","id":3,"result":{"a":1}})
        );
        let v = response(&Value::Null, &Err(RpcError::new(-1, "no")));
        assert_eq!(
            v,
            serde_json::json!({"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"no"}})
        );
    }

    fn lines(input: &[u8], max: usize, cap: usize) -> Vec<Line> {
        // A tiny BufReader capacity exercises lines spanning many reads.
        let mut r = LineReader::new(BufReader::with_capacity(cap, Cursor::new(input)), max);
        let mut out = Vec::new();
        loop {
            match r.next_line() {
                Ok(Line::Eof) => break,
                Ok(l) => out.push(l),
                Err(e) => panic!("{e}"),
            }
        }
        out
    }

    #[test]
    fn line_reader_limits_and_recovers() {
        let mut input = b"short\r\n".to_vec();
        input.extend(vec![b'x'; 100]);
        input.extend(b"\nafter\nlast-without-newline");
        for cap in [1, 3, 8, 64, 4096] {
            let got = lines(&input, 24, cap);
            assert_eq!(got.len(), 4, "cap {cap}: {got:?}");
            assert_eq!(got[0], Line::Data(b"short".to_vec()));
            assert!(matches!(got[1], Line::TooLong { len } if len > 24));
            assert_eq!(got[2], Line::Data(b"after".to_vec()));
            assert_eq!(got[3], Line::Data(b"last-without-newline".to_vec()));
        }
        let exact = lines(b"0123456789\n", 10, 4);
        assert_eq!(exact, vec![Line::Data(b"0123456789".to_vec())]);
    }

    #[test]
    fn a_pre_serialized_result_gives_the_bytes_of_its_value() {
        let result = serde_json::json!({
            "z": [1, 2.5, null, true],
            "a": "quote \" backslash \\ newline \n tab \t unicode \u{e9} \u{1f600} nul \u{0}",
            "nested": {"b": {}, "a": []},
        });
        let raw: Arc<str> = serde_json::to_string(&result)
            .unwrap_or_else(|e| panic!("{e}"))
            .into();
        for id in [
            Value::from(7),
            Value::from(-1.5),
            Value::from("id \"with\" quotes \u{2028}"),
            Value::Null,
        ] {
            let fresh = response_line(&id, &Ok(Reply::Value(result.clone())));
            let reused = response_line(&id, &Ok(Reply::Json(Arc::clone(&raw))));
            assert_eq!(
                String::from_utf8_lossy(&reused),
                String::from_utf8_lossy(&fresh)
            );
            assert_eq!(Reply::Json(Arc::clone(&raw)).into_value(), result);
        }
    }
}
