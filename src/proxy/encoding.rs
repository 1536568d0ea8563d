//! Request bodies a client compressed (`Content-Encoding`), read for the rewrite and
//! compressed again the same way before they go upstream.
//!
//! Codex signed in with ChatGPT sends its model calls compressed with zstd (its
//! `enable_request_compression`, on by default in 0.171); Claude Code and Codex with an API key
//! send plain JSON. A body in a coding not known here, or one that does not decode, goes as it
//! came: the proxy never breaks a call it cannot read.

use std::io::Read;

use hyper::header::{CONTENT_ENCODING, HeaderMap};

/// A request body's coding, other than none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    Zstd,
    Gzip,
}

impl Coding {
    /// As `Content-Encoding` names it.
    pub fn name(self) -> &'static str {
        match self {
            Coding::Zstd => "zstd",
            Coding::Gzip => "gzip",
        }
    }
}

/// The body's coding by its `Content-Encoding`: `Ok(None)` for none (or `identity`), `Err`
/// with the header's value for a coding not read here (`br`, or several in a row).
pub fn of(headers: &HeaderMap) -> Result<Option<Coding>, String> {
    let Some(value) = headers.get(CONTENT_ENCODING) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or_default().trim();
    match text.to_ascii_lowercase().as_str() {
        "" | "identity" => Ok(None),
        "zstd" => Ok(Some(Coding::Zstd)),
        "gzip" | "x-gzip" => Ok(Some(Coding::Gzip)),
        _ => Err(String::from_utf8_lossy(value.as_bytes()).into_owned()),
    }
}

/// `body` decoded; an error past `limit` bytes of JSON (a small body can expand a thousandfold,
/// and the whole of it is held for the rewrite).
pub fn decode(coding: Coding, body: &[u8], limit: usize) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(body.len().saturating_mul(4).min(limit));
    let cap = limit as u64 + 1;
    match coding {
        Coding::Zstd => {
            let mut source = body;
            let decoder = ruzstd::decoding::StreamingDecoder::new(&mut source)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            decoder.take(cap).read_to_end(&mut out)?;
        }
        Coding::Gzip => {
            flate2::read::MultiGzDecoder::new(body)
                .take(cap)
                .read_to_end(&mut out)?;
        }
    }
    if out.len() > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("it decodes to more than {limit} bytes"),
        ));
    }
    Ok(out)
}

/// `body` encoded as the client sent it.
pub fn encode(coding: Coding, body: &[u8]) -> std::io::Result<Vec<u8>> {
    match coding {
        // The rewritten body is small (the history is gone): the fastest level is enough.
        Coding::Zstd => Ok(ruzstd::encoding::compress_to_vec(
            body,
            ruzstd::encoding::CompressionLevel::Fastest,
        )),
        Coding::Gzip => {
            let mut out = Vec::with_capacity(body.len() / 4);
            let mut e = flate2::read::GzEncoder::new(body, flate2::Compression::fast());
            e.read_to_end(&mut out)?;
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    #[test]
    fn bodies_come_back_as_they_went() {
        let json = br#"{"input": [{"type": "message", "role": "user"}], "x": "aaaaaaaaaaaaaaaa"}"#;
        for coding in [Coding::Zstd, Coding::Gzip] {
            let packed = encode(coding, json).expect("encode");
            assert_ne!(packed.as_slice(), json.as_slice());
            assert_eq!(decode(coding, &packed, 1 << 20).expect("decode"), json);
            // Past the limit, and not of the coding: errors, not a body.
            assert!(decode(coding, &packed, 10).is_err());
            assert!(decode(coding, json, 1 << 20).is_err());
        }
    }

    #[test]
    fn the_coding_is_read_from_the_header() {
        let mut h = HeaderMap::new();
        assert_eq!(of(&h), Ok(None));
        for (value, coding) in [
            ("zstd", Ok(Some(Coding::Zstd))),
            ("GZIP", Ok(Some(Coding::Gzip))),
            ("identity", Ok(None)),
            ("br", Err("br".to_owned())),
            ("gzip, zstd", Err("gzip, zstd".to_owned())),
        ] {
            h.insert(CONTENT_ENCODING, HeaderValue::from_static(value));
            assert_eq!(of(&h), coding, "{value}");
        }
    }
}
