//! A small blocking client for the socket, used by the CLI (and handy in tests).

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::protocol::RpcError;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    // The cause is the error's source: `{:#}` prints it after the message, once.
    #[error("cannot connect to {path:?} (is `worldfs mount` running?)")]
    Connect {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("talking to the daemon")]
    Io(#[from] io::Error),
    #[error("the daemon closed the connection")]
    Closed,
    #[error("the daemon sent something that is not JSON-RPC: {0}")]
    BadResponse(String),
    #[error("{} (code {})", .0.message, .0.code)]
    Rpc(RpcError),
}

pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
}

impl Client {
    /// Connects with a read timeout of `timeout` per response.
    pub fn connect(path: &Path, timeout: Duration) -> Result<Client, ClientError> {
        let s = UnixStream::connect(path).map_err(|source| ClientError::Connect {
            path: path.to_owned(),
            source,
        })?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        let writer = s.try_clone()?;
        Ok(Client {
            reader: BufReader::new(s),
            writer,
            next_id: 0,
        })
    }

    /// Calls `method` and returns its result; notifications arriving meanwhile are skipped.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, ClientError> {
        self.next_id += 1;
        let id = self.next_id;
        let mut line = serde_json::to_vec(
            &json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }),
        )
        .map_err(|e| ClientError::BadResponse(e.to_string()))?;
        line.push(b'\n');
        self.writer.write_all(&line)?;
        loop {
            let v = self.read_message()?;
            if v.get("id") == Some(&Value::from(id)) || v.get("id") == Some(&Value::Null) {
                return into_result(v);
            }
        }
    }

    /// Calls `method`; a daemon older than the client (a mount started before worldfs was
    /// upgraded), which refuses `field` as unknown, is asked again without it, as it always
    /// was.
    pub fn call_or_older(
        &mut self,
        method: &str,
        params: Value,
        field: &str,
    ) -> Result<Value, ClientError> {
        match self.call(method, params.clone()) {
            Err(ClientError::Rpc(e))
                if e.code == super::protocol::code::INVALID_PARAMS
                    && e.message.contains(&format!("unknown field `{field}`")) =>
            {
                let mut older = params;
                if let Some(o) = older.as_object_mut() {
                    o.remove(field);
                }
                self.call(method, older)
            }
            other => other,
        }
    }

    /// How long [`Client::read_message`] waits; `None` waits for as long as it takes (a
    /// subscriber's stream may be quiet for hours).
    pub fn set_read_timeout(&mut self, timeout: Option<Duration>) -> Result<(), ClientError> {
        Ok(self.reader.get_ref().set_read_timeout(timeout)?)
    }

    /// Reads the next message (response or notification).
    pub fn read_message(&mut self) -> Result<Value, ClientError> {
        let mut buf = String::new();
        loop {
            buf.clear();
            if self.reader.read_line(&mut buf)? == 0 {
                return Err(ClientError::Closed);
            }
            if !buf.trim().is_empty() {
                break;
            }
        }
        serde_json::from_str(&buf).map_err(|e| ClientError::BadResponse(format!("{e}: {buf}")))
    }
}

/// A response object as a result.
pub fn into_result(mut v: Value) -> Result<Value, ClientError> {
    if let Some(e) = v.get_mut("error") {
        let code = e.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = e
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("unknown error")
            .to_string();
        let mut err = RpcError::new(code, message);
        if let Some(d) = e.get("data") {
            err = err.with_data(d.clone());
        }
        return Err(ClientError::Rpc(err));
    }
    match v.get_mut("result") {
        Some(r) => Ok(r.take()),
        None => Err(ClientError::BadResponse(v.to_string())),
    }
}

/// `params` (an object) naming the conversation of `session`, when there is one (the socket's
/// `session` parameter; without it, a method speaks of the conversation changed last).
pub fn of_session(mut params: Value, session: Option<&str>) -> Value {
    if let (Some(s), Some(o)) = (session, params.as_object_mut()) {
        o.insert("session".into(), Value::String(s.to_owned()));
    }
    params
}
