//! How `worldfs watch` (and `worldfs status`) write times and counts.

/// `12,400`: token counts are read at a glance.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A conversation's id as the watch and `worldfs status` name it: its first 8 characters, which
/// tell a mount's few conversations apart.
pub(crate) fn short_id(id: &str) -> String {
    id.chars().take(8).collect()
}

/// What a projection served cost (a `projections` event, or `stats.last_projection`):
/// `7,812 of 8,000 tokens, 23 shown`.
pub(crate) fn cost(e: &serde_json::Value) -> String {
    let u = |k: &str| e.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
    format!(
        "{} of {} tokens, {} shown",
        thousands(u("tokens")),
        thousands(u("budget")),
        u("entries")
    )
}

/// The time of day in the local time zone, to the millisecond.
pub(crate) fn clock(time_ms: u64) -> String {
    i64::try_from(time_ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map(|t| {
            t.to_zoned_datetime(jiff::tz::TimeZone::system())
                .strftime("%H:%M:%S%.3f")
                .to_string()
        })
        .unwrap_or_else(|| "--:--:--.---".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
